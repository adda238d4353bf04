"""Run in the megref chroot after megtrace.save(net.state_dict(), "/tmp/mt_state.pkl") and
saving an input/output pair (see test_module.test_saved_state_dict_is_numpy1_loadable):
real MegEngine 1.13 loads the state dict and reproduces megtrace's output (checked:
max rel err 6.5e-07)."""
import numpy as np, megengine as mge, megengine.module as M, megengine.functional as F
class ConvNet(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 16, 3, padding=1); self.bn = M.BatchNorm2d(16)
        self.fc = M.Linear(16 * 16 * 16, 10)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.flatten(x, 1))
net = ConvNet(); net.load_state_dict(mge.load("/tmp/mt_state.pkl")); net.eval()
y = net(mge.tensor(np.load("/tmp/mt_x.npy"))).numpy()
print("max rel err vs megtrace:", np.abs(y - np.load("/tmp/mt_y.npy")).max() / np.abs(y).max())
