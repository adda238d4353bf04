"""Keep a tuning record only where it beats what megtrace builds without tuning.

A small trial budget often ends with records slower than the rule-scheduled kernel
(or the same kernel left to the generic rule): applying them would make the tuned
build slower. After tuning, each task's best record and the untuned version of the
same PrimFunc are built and measured again, back to back, by the same runner with
more repeats; only records faster by `margin` go into the database builds apply.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from .pipelines import generic_rule


@dataclass
class GateResult:
    """One task's re-measurement (microseconds; None where it could not run)."""

    name: str
    tuned_us: float | None
    untuned_us: float | None
    kept: bool
    note: str = ""


def untuned_module(mod: Any, target: Any) -> Any:
    """The task's PrimFunc as a tuned build would compile it without a record."""
    rule = generic_rule()
    if rule is None:
        return mod
    with target:
        sch = rule.apply(mod["main"], target, False)
    return mod if sch is None else sch.mod


def gate(tasks: list[tuple[str, Any]], database: Any, target: Any, builder: Any,
         runner: Any, margin: float = 0.03) -> list[GateResult]:
    """Re-measure every task (name, workload module) with a record in `database`."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    results: dict[str, GateResult] = {}
    jobs = []                                    # (name, tuned module, untuned module)
    for name, mod in tasks:
        sch = database.query_schedule(mod, target, "main")
        if sch is None:
            results[name] = GateResult(name, None, None, False, "no record")
        else:
            jobs.append((name, mod, sch.mod, untuned_module(mod, target)))
    if not jobs:
        return [results[n] for n, _ in tasks]
    inputs = [BuilderInput(m, target) for _, _, tuned, plain in jobs for m in (tuned, plain)]
    built = builder.build(inputs)
    run_inputs, where = [], []
    for i, b in enumerate(built):
        if b.error_msg is None:
            args = ArgInfo.from_prim_func(jobs[i // 2][1]["main"])
            run_inputs.append(RunnerInput(b.artifact_path, _device_type(target), args))
            where.append(i)
    times: list[float | None] = [None] * len(built)
    for i, future in zip(where, runner.run(run_inputs)):
        res = future.result()
        if res.error_msg is None and res.run_secs:
            times[i] = statistics.median(float(s) for s in res.run_secs) * 1e6
    for j, (name, _, _, _) in enumerate(jobs):
        tuned, plain = times[2 * j], times[2 * j + 1]
        if tuned is None:
            results[name] = GateResult(name, None, plain, False, "record failed to run")
        elif plain is None:
            results[name] = GateResult(name, tuned, None, True, "untuned failed to run")
        else:
            results[name] = GateResult(name, tuned, plain, tuned < plain * (1 - margin))
    return [results[n] for n, _ in tasks]


def _device_type(target: Any) -> str:
    kind = target.kind.name
    return "cpu" if kind == "llvm" else kind
