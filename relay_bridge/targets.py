"""Named TVM targets (JSON-dict form; TVM 0.27 rejects "llvm -mcpu=..." strings)."""
from __future__ import annotations

import os
from typing import Any

from ._tvm import tvm
from .deploy import host_cpu_flags, request_amx

PRESETS: dict[str, dict[str, Any]] = {
    "x86-avx2": {"kind": "llvm", "mcpu": "haswell"},
    "x86-avx512": {"kind": "llvm", "mcpu": "skylake-avx512"},
    "aarch64": {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76",
                "mattr": ["+neon", "+dotprod"]},
    "cuda-sm80": {"kind": "cuda", "arch": "sm_80"},
    "cuda-sm90": {"kind": "cuda", "arch": "sm_90"},
}


# ISA extensions that a hypervisor may hide from a guest whose CPU model has them: LLVM
# names the host by its CPU model (znver4), so the features the OS really enables must be
# subtracted, or the code dies with SIGILL. Turning off the base feature turns off its
# family (-avx512f drops every AVX-512 extension).
_MASKABLE = (("avx512f", "avx512f"), ("avx2", "avx2"), ("fma", "fma"), ("f16c", "f16c"))


def _masked_features(cpu: str) -> list[str]:
    """`-feature` for every extension LLVM credits `cpu` with that the OS does not enable."""
    flags = host_cpu_flags()
    if flags is None:
        return []
    codegen = tvm().target.codegen
    has = codegen.llvm_get_cpu_features(tvm().target.Target({"kind": "llvm", "mcpu": cpu}))
    return [f"-{llvm}" for llvm, os_flag in _MASKABLE if llvm in has and os_flag not in flags]


AMX_ENV = "MEGTRACE_AMX"          # 0/off: no AMX tiles (cpu/amx.py) in host builds
AMX_ATTRS = ("+amx-tile", "+amx-bf16")


def amx_wanted() -> bool:
    """MEGTRACE_AMX is not 0/off and Linux lends this process the AMX tile state."""
    off = os.environ.get(AMX_ENV, "1").strip().lower() in ("0", "off", "false", "no")
    return not off and request_amx()


def has_amx(target: Any) -> bool:
    """Whether kernels built for `target` (a resolved llvm Target) may use AMX tiles here:
    its -mattr names them and this process may run them."""
    if target.kind.name != "llvm":
        return False
    mattr = [str(a) for a in (target.attrs.get("mattr") or [])]
    return all(a in mattr for a in AMX_ATTRS) and request_amx()


def host_target() -> dict[str, Any]:
    """The machine we run on: llvm with the detected -mcpu, minus the ISA extensions the OS
    does not enable, plus AMX where the process may use it (LLVM names this host by a
    CPU model without it), and every core."""
    cpu = tvm().target.codegen.llvm_get_system_cpu()
    spec: dict[str, Any] = {"kind": "llvm", "mcpu": cpu, "num-cores": os.cpu_count() or 1}
    mattr = _masked_features(cpu) + (list(AMX_ATTRS) if amx_wanted() else [])
    if mattr:
        spec["mattr"] = mattr
    return spec


def resolve(target: Any = None):
    """A tvm.target.Target from None (host), "llvm"/"host", a preset name, a dict or a Target."""
    t = tvm()
    if target is None or target in ("llvm", "host", "cpu"):
        return t.target.Target(host_target())
    if isinstance(target, t.target.Target):
        return target
    if isinstance(target, str):
        if target not in PRESETS:
            raise ValueError(f"target: unknown name {target!r}; expected 'llvm'/'host', one of "
                             f"{sorted(PRESETS)}, or a TVM target dict")
        target = PRESETS[target]
    if not isinstance(target, dict):
        raise ValueError(f"target: expected a name, a dict or a tvm Target; got {target!r}")
    spec = dict(target)
    if spec.get("kind") == "cuda":
        return t.target.Target(spec, host=host_target())
    return t.target.Target(spec)
