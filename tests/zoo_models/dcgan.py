"""A DCGAN generator written with MegEngine's API (Radford et al.; the zoo's
megengine_mimicry DCGAN family): a Linear projection of the noise, then ConvTranspose2d
upsampling stages with BatchNorm and ReLU, tanh output; M.init.normal_ as DCGAN prescribes."""
import megtrace.functional as F
import megtrace.module as M


class DCGANGenerator(M.Module):
    def __init__(self, nz=16, ngf=8, bottom_width=4, channels=3):
        super().__init__()
        self.nz, self.ngf, self.bottom_width = nz, ngf, bottom_width
        self.l1 = M.Linear(nz, bottom_width * bottom_width * ngf * 4)
        self.deconv1 = M.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1)
        self.bn1 = M.BatchNorm2d(ngf * 2)
        self.deconv2 = M.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1)
        self.bn2 = M.BatchNorm2d(ngf)
        self.deconv3 = M.ConvTranspose2d(ngf, channels, 3, 1, 1)
        for m in self.modules():
            if isinstance(m, (M.ConvTranspose2d, M.Linear)):
                M.init.normal_(m.weight, 0.0, 0.02)
                M.init.zeros_(m.bias)
            elif isinstance(m, M.BatchNorm2d):
                M.init.normal_(m.weight, 1.0, 0.02)
                M.init.zeros_(m.bias)

    def forward(self, x):
        h = self.l1(x)
        h = h.reshape(x.shape[0], -1, self.bottom_width, self.bottom_width)
        h = F.relu(self.bn1(self.deconv1(h)))
        h = F.relu(self.bn2(self.deconv2(h)))
        return F.tanh(self.deconv3(h))
