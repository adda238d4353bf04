import pickle, pickletools, io
import numpy as np
import megengine as mge
import megengine.module as M
import megengine.functional as F

class ConvNet(M.Module):
    def __init__(self):
        super().__init__()
        self.conv = M.Conv2d(3, 16, 3, padding=1)
        self.bn = M.BatchNorm2d(16)
        self.fc = M.Linear(16 * 16 * 16, 10)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.flatten(x, 1))

np.random.seed(0)
net = ConvNet()
net.bn.running_mean[...] = mge.tensor(np.random.normal(size=(1,16,1,1)).astype("float32"))
net.eval()
sd = net.state_dict()
print({k: (type(v).__name__, v.shape) for k, v in sd.items()})
mge.save(sd, "megengine_convnet_state.pkl")
mge.save({"w": mge.tensor(np.arange(6, dtype="float32").reshape(2, 3)), "step": 3}, "megengine_tensor_dict.pkl")
x = np.random.rand(2, 3, 32, 32).astype("float32")
np.save("megengine_convnet_in.npy", x)
np.save("megengine_convnet_out.npy", net(mge.tensor(x)).numpy())
data = open("megengine_tensor_dict.pkl", "rb").read()
globals_ = set()
for op, arg, pos in pickletools.genops(data):
    if op.name in ("GLOBAL", "STACK_GLOBAL", "SHORT_BINUNICODE") and isinstance(arg, str) and "." in (arg or ""):
        globals_.add(arg)
print(sorted(globals_)[:30])
