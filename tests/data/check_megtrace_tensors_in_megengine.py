"""Run in the megref chroot after megtrace.save({"w": tensor, "p": Parameter, "step": 3},
"/tmp/mt_tensors.pkl"): real MegEngine 1.13 rebuilds its own Tensor and Parameter (checked)."""
import megengine as mge
o = mge.load("/tmp/mt_tensors.pkl")
print(type(o["w"]).__module__, type(o["w"]).__name__, o["w"].numpy().tolist(), type(o["p"]).__name__, o["p"].numpy().tolist(), o["step"])
