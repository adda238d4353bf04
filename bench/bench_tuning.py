"""Does MetaSchedule tuning beat megtrace's CPU rules? (not a test)

    .venv/bin/python bench/bench_tuning.py [--models mobilenetv2,encoder] [--batch 1]
        [--threads 1] [--trials 8] [--base default] [--work-dir DIR] [--out PREFIX]

For each model: (1) one process runs `tune` (what `megtrace tune` runs) with `--trials`
per task on the `--base` lowering ("default": every kernel of TVM's plain lowering,
so tuned kernels compete with the rule kernels; "rules": only the kernels the rules
leave to the generic schedule); (2) a second, fresh process builds the model with
the records (compile_tuned; the record count before and after shows nothing was
tuned again) and with the CPU rules (compile_graph's build), times both whole models
alternately, and times every kernel of both builds. Each rule kernel is set against
the tuned kernel at the same place in the call sequence (when both builds call the
same number of compute kernels), grouped by kind (depthwise, conv, dense = GEMV at
batch 1, matmul, other).

Prints rich tables and writes PREFIX.json and PREFIX.md. Workers inherit this
process's niceness: run it under `nice -n 10` on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

from bench_models import prepare, run_worker  # noqa: E402

KINDS = ("depthwise", "conv", "dense", "matmul", "other")


def kind_of(rule_name: str) -> str:
    """The kind of a rule kernel from its name ('depthwise3', 'conv12', 'dense1')."""
    base = re.sub(r"\d+$", "", rule_name.removeprefix("fused_"))
    for k in KINDS[:-1]:
        if base.startswith(k):
            return k
    return "other"


DATA_ONLY = {"reshape", "transpose", "strided", "slice", "copy", "squeeze", "expand",
             "dims", "concatenate", "split", "layout", "transform"}


def _compute(calls: list) -> list:
    """The calls that do arithmetic: a kernel whose name is made of data-moving ops
    only (fused_reshape1_transpose2, ...) is left out; fused_reshape_add_gelu stays."""
    def moves_data_only(name: str) -> bool:
        words = {w.rstrip("0123456789") for w in name.removeprefix("fused_").split("_")}
        return words <= DATA_ONLY
    return [c for c in calls if not moves_data_only(c[0])]


def pair_kernels(rules: list, tuned: list) -> list[dict] | None:
    """Rule kernel i against tuned kernel i, or None when the builds call different
    numbers of compute kernels (then only totals compare)."""
    a, b = _compute(rules), _compute(tuned)
    if len(a) != len(b):
        return None
    return [dict(index=i, rule=ra[0], tuned=tb[0], kind=kind_of(ra[0]), rules_us=ra[1],
                 tuned_us=tb[1]) for i, (ra, tb) in enumerate(zip(a, b))]


def by_kind(pairs: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for p in pairs:
        k = out.setdefault(p["kind"], dict(calls=0, rules_us=0.0, tuned_us=0.0, wins=0))
        k["calls"] += 1
        k["rules_us"] += p["rules_us"]
        k["tuned_us"] += p["tuned_us"]
        k["wins"] += p["rules_us"] >= 1.1 * p["tuned_us"]
    return out


def _best_records(records: Path) -> dict[int, tuple[float, list]]:
    """workload index -> (mean seconds, trace) of its fastest measured record."""
    best: dict[int, tuple[float, list]] = {}
    for line in records.open():
        if not line.strip():
            continue
        idx, (trace, run_secs, *_rest) = json.loads(line)
        if not run_secs:
            continue
        secs = sum(float(x) for x in run_secs) / len(run_secs)
        if secs < 1e9 and (idx not in best or secs < best[idx][0]):   # 1e10: failed run
            best[idx] = (secs, trace)
    return best


def _choices(insts: list, decisions: list) -> str:
    """'tile 16x48, parallel 16, vectorize 64, unroll_explicit 512' from one trace."""
    made = {int(i): d for i, d in decisions}
    picks, values = [], {}
    for i, (kind, inputs, attrs, outs) in enumerate(insts):
        if kind == "SampleCategorical" and i in made:
            values[outs[0]] = attrs[0][made[i]]       # e.g. the unroll depth
        elif kind == "SamplePerfectTile" and i in made:
            picks.append("tile " + "x".join(str(v) for v in made[i]))
        elif kind == "Annotate" and attrs and str(attrs[0]).split(".")[-1] in (
                "parallel", "vectorize", "unroll_explicit", "unroll_implicit"):
            picks.append(f"{attrs[0].split('.')[-1]} {values.get(inputs[1], inputs[1])}")
    return ", ".join(picks)


def tuner_picks(tune_dir: Path) -> list[dict]:
    """Per tuned workload, what its best record chose (read from MetaSchedule's JSON
    database): the parallel / vectorize extents, tile splits and unroll depth."""
    out = []
    for folder in sorted(tune_dir.glob("*/")):
        records = folder / "database_tuning_record.json"
        if not records.is_file():
            continue
        hashes = [json.loads(line)[0] for line in (folder / "database_workload.json").open()
                  if line.strip()]
        names_file = folder / "decisions.json"
        names = json.loads(names_file.read_text()) if names_file.is_file() else {}
        for idx, (secs, (insts, decisions)) in sorted(_best_records(records).items()):
            info = names.get(hashes[idx], {}) if idx < len(hashes) else {}
            out.append(dict(name=info.get("name", f"workload {idx}"), best_us=secs * 1e6,
                            kept=info.get("kept"), picks=_choices(insts, decisions)))
    return out


def bench_model(name: str, args, work: Path) -> dict:
    files = prepare(name, args.batch, work / f"{name}_b{args.batch}")
    tune_dir = work / f"tune-{name}-b{args.batch}-{args.base}"
    cfg = dict(files, tune_dir=tune_dir, threads=args.threads, trials=args.trials,
               base=args.base, min_time=args.min_time, profile_runs=args.profile_runs)
    row: dict = {"model": name, "batch": args.batch, "threads": args.threads,
                 "base": args.base, "trials": args.trials}
    if args.compare_only:
        earlier = Path(f"{args.compare_only}.json")
        row["tune"] = next(r["tune"] for r in json.loads(earlier.read_text())["rows"]
                           if r["model"] == name and r["base"] == args.base)
        row["tune_wall_s"] = None
    else:
        print(f"[{name}] tuning ({args.trials} trials per task, base={args.base}, "
              f"{args.threads} thread(s)) ...", flush=True)
        start = time.perf_counter()
        row["tune"] = run_worker(sys.executable, "worker_tuning.py", dict(cfg, mode="tune"),
                                 args.threads, args.tune_timeout)
        row["tune_wall_s"] = round(time.perf_counter() - start, 1)
    if "error" in row["tune"]:
        print(f"[{name}] tuning failed: {row['tune']['error']}", flush=True)
        return row
    print(f"[{name}] comparing in a fresh process ...", flush=True)
    row["picks"] = tuner_picks(tune_dir)
    row["compare"] = cmp = run_worker(sys.executable, "worker_tuning.py",
                                      dict(cfg, mode="compare"), args.threads, args.timeout)
    if "error" not in cmp:
        pairs = pair_kernels(cmp["kernels"]["rules"], cmp["kernels"]["tuned"])
        row["pairs"] = pairs
        row["by_kind"] = by_kind(pairs) if pairs else None
    return row


def _f(v, spec=".1f", none="-"):
    return none if v is None else format(v, spec)


def _cpu_text(c: dict) -> str:
    """'12.3 / 11.0 (1.12x)': the whole models' CPU time per call (one thread)."""
    if "rules_cpu_ms" not in c:
        return "-"
    return (f"{c['rules_cpu_ms']:.2f} / {c['tuned_cpu_ms']:.2f} "
            f"({c['rules_cpu_ms'] / c['tuned_cpu_ms']:.2f}x)")


def tables(rows: list[dict]) -> list:
    """rich Tables: whole models, then per kind, then per tuned task."""
    from rich.table import Table
    whole = Table(title="Whole model: CPU rules vs tuned (ms; >1x: tuning pays)")
    for col in ("model", "b", "t", "base", "trials/task", "tune s", "rules ms", "tuned ms",
                "rules/tuned", "CPU ms rules / tuned", "tuned in process 1 ms",
                "records before/after", "build s", "rel err"):
        whole.add_column(col, justify="left" if col in ("model", "base") else "right")
    kinds = Table(title="Per kernel kind, summed over calls (us; wins: calls >= 1.1x "
                        "faster tuned)")
    for col in ("model", "kind", "calls", "rules us", "tuned us", "rules/tuned", "wins"):
        kinds.add_column(col, justify="left" if col in ("model", "kind") else "right")
    tasks = Table(title="Per tuned task (MetaSchedule's re-measurement, us; 'untuned' is "
                        "the generic schedule of the same kernel)")
    for col in ("model", "task", "trials", "untuned us", "tuned us", "kept"):
        tasks.add_column(col, justify="left" if col in ("model", "task") else "right")
    for r in rows:
        t, c = r.get("tune", {}), r.get("compare", {})
        if "error" in t or "error" in c:
            whole.add_row(r["model"], str(r["batch"]), str(r["threads"]), r["base"],
                          str(r["trials"]), "err", *["-"] * 8)
            continue
        ratio = c["rules_ms"] / c["tuned_ms"]
        whole.add_row(r["model"], str(r["batch"]), str(r["threads"]), r["base"],
                      str(r["trials"]), _f(t["tune_s"], ".0f"), _f(c["rules_ms"], ".3f"),
                      _f(c["tuned_ms"], ".3f"), f"{ratio:.2f}x", _cpu_text(c),
                      _f(t.get("tuned_ms"), ".3f"),
                      f"{c['records_before']}/{c['records_after']}",
                      _f(c["tuned_build_s"], ".1f"), f"{c['rel_err']:.1e}")
        for kind, k in (r.get("by_kind") or {}).items():
            kinds.add_row(r["model"], kind, str(k["calls"]), _f(k["rules_us"]),
                          _f(k["tuned_us"]), f"{k['rules_us'] / max(k['tuned_us'], 1e-9):.2f}x",
                          str(k["wins"]))
        if r.get("by_kind") is None:
            kinds.add_row(r["model"], "(builds call different kernels: totals only)",
                          "-", _f(sum(u for _, u in c["kernels"]["rules"])),
                          _f(sum(u for _, u in c["kernels"]["tuned"])), "-", "-")
        for task in t["tasks"]:
            tasks.add_row(r["model"], task["name"][:48], str(task["trials"]),
                          _f(task["untuned_us"]), _f(task["tuned_us"]),
                          {True: "yes", False: "no", None: "-"}[task["kept"]])
    picks = Table(title="What the tuner picked (best record per task; tile: loop splits, "
                        "pick: categorical choices such as the unroll depth)")
    for col in ("model", "task", "best us", "kept", "choices"):
        picks.add_column(col, justify="right" if col == "best us" else "left")
    for r in rows:
        for p in r.get("picks", []):
            picks.add_row(r["model"], p["name"][:48], _f(p["best_us"]),
                          {True: "yes", False: "no", None: "-"}[p["kept"]], p["picks"][:120])
    return [whole, kinds, tasks, picks]


def markdown(rows: list[dict], load: tuple) -> str:
    lines = [f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", "",
             "| model | b | t | base | trials/task | tune s | rules ms | tuned ms | "
             "rules/tuned | CPU ms rules / tuned | records before/after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, c = r.get("tune", {}), r.get("compare", {})
        if "error" in t or "error" in c:
            lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['base']} | "
                         f"{r['trials']} | error | | | | | |")
            continue
        lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['base']} | "
                     f"{r['trials']} | {t['tune_s']:.0f} | {c['rules_ms']:.3f} | "
                     f"{c['tuned_ms']:.3f} | {c['rules_ms'] / c['tuned_ms']:.2f}x | "
                     f"{_cpu_text(c)} | {c['records_before']}/{c['records_after']} |")
    lines += ["", "| model | kind | calls | rules us | tuned us | rules/tuned | calls >= 1.1x |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        for kind, k in (r.get("by_kind") or {}).items():
            lines.append(f"| {r['model']} | {kind} | {k['calls']} | {k['rules_us']:.1f} | "
                         f"{k['tuned_us']:.1f} | {k['rules_us'] / max(k['tuned_us'], 1e-9):.2f}x"
                         f" | {k['wins']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenetv2,encoder")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--trials", type=int, default=8, help="trials per task")
    ap.add_argument("--base", choices=("auto", "rules", "default"), default="default")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds of whole-model timing")
    ap.add_argument("--profile-runs", type=int, default=15, help="instrumented runs per build")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--tune-timeout", type=float, default=7200.0)
    ap.add_argument("--work-dir", default=None,
                    help="models and tuning records (reused: tuning continues from them)")
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    ap.add_argument("--compare-only", default=None, metavar="PREFIX",
                    help="no tuning: time the builds again from the records in --work-dir "
                         "(the tuning figures come from PREFIX.json of the run that tuned)")
    ap.add_argument("--render", nargs="+", default=None, metavar="JSON",
                    help="print the tables of earlier runs' OUT.json files (no tuning)")
    args = ap.parse_args(argv)
    from rich.console import Console
    import nets
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in nets.MODELS:
            ap.error(f"--models: unknown {m!r}; known: {sorted(nets.MODELS)}")
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mt-tune-"))
    console = Console(width=200)
    if args.render:
        rows = [r for f in args.render for r in json.loads(Path(f).read_text())["rows"]]
        for r in rows:
            folder = Path(f"{args.work_dir or ''}") / f"tune-{r['model']}-b{r['batch']}-{r['base']}"
            if args.work_dir and folder.is_dir():
                r["picks"] = tuner_picks(folder)
            if "error" not in r.get("compare", {"error": 1}):
                r["pairs"] = pair_kernels(r["compare"]["kernels"]["rules"],
                                          r["compare"]["kernels"]["tuned"])
                r["by_kind"] = by_kind(r["pairs"]) if r["pairs"] else None
        for table in tables(rows):
            console.print(table)
        if args.out:     # the load average the (first) run measured, not today's
            load = json.loads(Path(args.render[0]).read_text()).get("load") or os.getloadavg()
            Path(f"{args.out}.md").write_text(markdown(rows, tuple(load)))
        return 0
    console.print(f"tuning benchmark: files in {work}; load average "
                  f"{os.getloadavg()[0]:.2f}")
    rows = [bench_model(name, args, work) for name in models]
    for table in tables(rows):
        console.print(table)
    load = os.getloadavg()
    console.print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for r in rows:
        if r.get("tune", {}).get("note"):
            console.print(f"{r['model']}: {r['tune']['note']}")
    if args.out:
        Path(f"{args.out}.json").write_text(json.dumps({"rows": rows, "load": load},
                                                       indent=1, default=str))
        Path(f"{args.out}.md").write_text(markdown(rows, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
