"""Per-kernel timings of a compiled graph, in a JSON shape modelled on MegEngine's
`trace.get_profile()`:

    {"graph_exec": {"target": str, "kernels": [kernel names in call order]},
     "profiler": {"device": {"<i>": {"<device>": {"name", "start", "kern", "end"}}},
                  "host": {...the same records...},
                  "opr_footprint": {}, "opr_internal_pf": {}}}

Times are seconds from the start of the run (MegEngine keys records by opr id; we key
them by call index). CPU kernels run synchronously, so host and device times coincide.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ._tvm import relax, tvm


def empty_profile() -> dict[str, Any]:
    return {"graph_exec": None,
            "profiler": {"device": {}, "host": {}, "opr_footprint": {}, "opr_internal_pf": {}}}


def profile_run(compiled, arrays: list[np.ndarray], clock: Callable[[], float] = time.perf_counter
                ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Run `compiled` once with a timing instrument on every VM call; outputs + profile.
    `clock` may be time.process_time (CPU seconds: steadier on a loaded machine, but
    with several threads it sums them)."""
    vm = relax().VirtualMachine(compiled.executable, compiled._device)
    stack: list[tuple[str, float]] = []
    events: list[tuple[str, float, float]] = []

    def instrument(func, symbol, before_run, ret_value, *args):
        now = clock()
        if before_run:
            stack.append((str(symbol), now))    # builtins (allocation, checks) popped too
        elif stack:
            name, start = stack.pop()
            events.append((name, start, now))
        return 0      # VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    t = tvm()
    # np.require, not np.ascontiguousarray: that makes 0-d inputs 1-d
    args = [t.runtime.tensor(np.require(a, requirements="C"), compiled._device) for a in arrays]
    origin = clock()
    result = vm["main"](*args)
    outputs = [r.numpy() for r in result]
    device = f"{compiled.target.kind.name}0"
    records = {str(i): {device: {"name": name, "start": s - origin, "kern": s - origin,
                                 "end": e - origin}}
               for i, (name, s, e) in enumerate(sorted(
                   (ev for ev in events if not ev[0].startswith("vm.builtin.")),
                   key=lambda ev: ev[1]))}
    report = empty_profile()
    report["graph_exec"] = {"target": str(compiled.target),
                            "kernels": [r[device]["name"] for r in records.values()]}
    report["profiler"]["device"] = records
    report["profiler"]["host"] = {k: dict(v) for k, v in records.items()}
    return outputs, report
