"""A model for `module_stats`, written against MegEngine's API and run by both MegEngine
1.13 (make_megengine_module_stats.py writes the golden statistics) and megtrace
(tests/test_module_stats.py): `lib` is the megengine or the megtrace package.

It has every counted module kind, a shared submodule, a Parameter shared by two modules,
and a forward that reads a submodule's weight without calling it."""
import numpy as np


def build(lib):
    M, F = lib.module, lib.functional

    class Block(M.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = M.Conv2d(3, 8, 3, stride=2, padding=1, bias=True)
            self.bn1 = M.BatchNorm2d(8)
            self.conv2 = M.Conv2d(8, 8, 3, padding=1, groups=2, bias=False)
            self.again = self.conv2                      # the same module twice
            self.conv3 = M.Conv2d(8, 8, 1)
            self.conv4 = M.Conv2d(8, 8, 1)
            self.conv4.weight = self.conv3.weight        # one Parameter in two modules
            self.gn = M.GroupNorm(2, 8)
            self.up = M.ConvTranspose2d(8, 4, 2, stride=2)
            self.ln = M.LayerNorm(4)
            self.pool = M.MaxPool2d(2)
            self.avg = M.AvgPool2d((2, 2))
            self.gap = M.AdaptiveAvgPool2d((1, 1))
            self.fc = M.Linear(4, 5)
            self.side = M.Conv2d(8, 8, 3, padding=1)      # used through its weight only

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = self.again(self.conv2(x))
            x = x + self.side.calc_conv(x, self.side.weight, self.side.bias)
            x = self.gn(self.conv4(self.conv3(x)))
            x = self.up(x)
            x = self.ln(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            x = self.avg(self.pool(x))
            return self.fc(F.flatten(self.gap(x), 1))

    net = Block()
    rng = np.random.RandomState(3)
    for name, p in sorted(net.named_parameters(), key=lambda kv: kv[0]):
        p[...] = rng.normal(0, 0.5, size=p.shape).astype("float32")
    return net


INPUT_SHAPE = (2, 3, 16, 16)


def inputs():
    return np.random.RandomState(5).rand(*INPUT_SHAPE).astype("float32")


def stats(lib, with_inputs: bool):
    """module_stats' totals and rows as plain JSON-able values."""
    from importlib import import_module
    module_stats = import_module(lib.__name__ + ".utils.module_stats").module_stats
    net = build(lib)
    kwargs = {"inputs": inputs()} if with_inputs else {"input_shapes": INPUT_SHAPE}
    total, details = module_stats(net, logging_to_stdout=False, **kwargs)

    def plain(v):
        if isinstance(v, (np.integer, np.floating)):
            return v.item()
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, np.dtype):
            return str(v)
        return v

    return {"total": {k: plain(v) for k, v in total._asdict().items()},
            "params": [{k: plain(v) for k, v in d.items()} for d in details.params],
            "flops": [{k: plain(v) for k, v in d.items()} for d in details.flops],
            "activations": [{k: plain(v) for k, v in d.items()} for d in details.activations]}
