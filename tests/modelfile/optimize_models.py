"""The models the optimize_for_inference option tests dump (the conv net, tests/zoo_models'
ResNet-18-like and MobileNetV2-like; tests/layout_models' PadNet and BlockNet), traced and
dumped once per session, and real MegEngine's summaries of the same
(tests/data/make_megengine_optimize_options.py, make_megengine_layout_models.py)."""
import io
import json

import numpy as np
from conftest import TESTS
from layout_models import LAYOUT_MODELS
from models import ConvNet, randomize_bn
from zoo_models import FAMILIES

import megtrace as mge
from megtrace.jit import trace

GOLDEN = json.loads((TESTS / "data" / "megengine_optimize_options.json").read_text())
LAYOUT_GOLDEN = json.loads((TESTS / "data" / "megengine_layout_models.json").read_text())
MODELS = ["convnet", "resnet", "mobilenet_v2"]


def option_kwargs(option: str) -> dict:
    return {k: True for k in option.split("+")} if option != "none" else {}


_TRACED: dict = {}


def traced(name: str):
    """(traced function, input, eager float32 output) per model, built once."""
    if name not in _TRACED:
        rng = np.random.default_rng(0)
        if name in LAYOUT_MODELS:
            net, shape = LAYOUT_MODELS[name][0](), LAYOUT_MODELS[name][1]
        else:
            net = ConvNet() if name == "convnet" else FAMILIES[name][0]()
            shape = (1, 3, 32, 32) if name == "convnet" else (1, 3, 64, 64)
        randomize_bn(net, rng).eval()
        x = rng.normal(size=shape)
        x = x.astype(np.float32)
        want = net(mge.tensor(x)).numpy()

        @trace(symbolic=True, capture_as_const=True)
        def infer(data):
            return net(data)
        infer(mge.tensor(x))
        _TRACED[name] = infer, x, want
        _NETS[name] = net
    return _TRACED[name]


_NETS: dict = {}


def batch_of(name: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(input, eager float32 output) of the model at another batch size than traced."""
    traced(name)
    x = np.random.default_rng(batch).normal(size=(batch,) + traced(name)[1].shape[1:])
    x = x.astype(np.float32)
    return x, _NETS[name](mge.tensor(x)).numpy()


_DUMPS: dict = {}


def dumped(name: str, option: str) -> bytes:
    """The model's dump with the option, made once per test session."""
    if (name, option) not in _DUMPS:
        buf = io.BytesIO()
        traced(name)[0].dump(buf, arg_names=["data"], **option_kwargs(option))
        _DUMPS[name, option] = buf.getvalue()
    return _DUMPS[name, option]
