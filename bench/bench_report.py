"""bench_models.py's results as a rich table, a markdown table and JSON.

clock "wall": medians of wall-clock time per call; "cpu": of the process's CPU time
per call, which on a loaded machine still compares one-thread runs (a descheduled
process uses no CPU time), but with several threads also counts idle spinning.

Ratios are other / megtrace's default `__call__` (>1: megtrace is faster); "best/call"
and "best/w-o host" set the faster of ONNX Runtime and OpenVINO against megtrace's two
call paths (the issue's goal: >= 1.2x); %peak is megtrace's GFLOP/s over the FMA peak
of the threads used: the worker's measured peak per thread (fma_peak.py), else (JSON of
older runs) PEAK_PER_THREAD.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# GFLOP/s of one core of the benchmark's Xeon host (AVX-512): 2 FMA ports x 16 float32
# lanes x 2 flops at ~3.6 GHz; 12 independent zmm FMA chains measure 218-230 there (a
# Zen 4 core: 116). Only for rows without the worker's measurement. AMX tile products
# (cpu/amx.py) are not FMAs, so the dense GEMMs may pass it.
PEAK_PER_THREAD = 230.0
TITLES = {"lite": "Lite", "torch": "torch", "inductor": "torch.compile",
          "onnxruntime": "ORT", "openvino": "OpenVINO"}
BEST_OF = ("onnxruntime", "openvino")
NAMES = {"mlp": "MLP 784-1024-512-10", "resnet18": "ResNet-18 224",
         "mobilenetv2": "MobileNetV2 224", "encoder": "Encoder s128 h768"}


def ms_text(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else (f"{ms:.2f}" if ms < 10 else f"{ms:.1f}")


KEYS = {"wall": ("median_ms", "without_host_ms"), "cpu": ("cpu_ms", "without_host_cpu_ms")}


def peak_per_thread(mt: dict) -> float:
    """The FMA peak (GFLOP/s) the megtrace worker measured on its host, else the Xeon's."""
    return mt.get("fma_peak_gflops") or PEAK_PER_THREAD


def peer_cell(r: dict, base: float | None, key: str = "median_ms") -> str:
    """'12.3 (1.05x)', 'n/a (not installed)' or 'err'."""
    if "missing" in r:
        return "n/a (not installed)"
    if key not in r:
        return "err" if "error" in r else "-"
    ratio = f" ({r[key] / base:.2f}x)" if base else ""
    return ms_text(r[key]) + ratio


def best_peer(row: dict, key: str = "median_ms") -> tuple[str, float] | None:
    """(runtime, ms) of the faster of ONNX Runtime and OpenVINO that ran."""
    got = [(rt, row[rt][key]) for rt in BEST_OF if key in row.get(rt, {})]
    return min(got, key=lambda p: p[1]) if got else None


def cells(row: dict, peers: list[str], tuning: bool, clock: str = "wall") -> list[str]:
    key, fast_key = KEYS[clock]
    mt = row.get("megtrace", {})
    call, fast = mt.get(key), mt.get(fast_key)
    out = [NAMES.get(row["model"], row["model"]), str(row["batch"]), str(row["threads"])]
    if call is None:
        out += ["err" if "error" in mt else "-", "-", "-", "-", "-"]
    else:
        flops = mt.get("flops") or 0
        peak = peak_per_thread(mt) * row["threads"]
        gf_call = flops / (call * 1e-3) / 1e9
        gf_fast = flops / (fast * 1e-3) / 1e9 if fast else 0.0
        out += [ms_text(call), ms_text(fast) if fast else "-",
                f"{gf_call:.1f}" if flops else "-",
                f"{100 * gf_call / peak:.0f}% / {100 * gf_fast / peak:.0f}%" if flops else "-"]
        out.append(f"{mt['first_call_s']:.1f}" if "first_call_s" in mt else "-")
    out += [peer_cell(row.get(rt, {}), call, key) for rt in peers]
    best = best_peer(row, key)
    if best and call:
        out += [f"{best[1] / call:.2f}x", f"{best[1] / fast:.2f}x" if fast else "-"]
    else:
        out += ["-", "-"]
    if tuning:
        r = row.get("tuned", {})
        cell = peer_cell(r, None)
        if fast and "median_ms" in r:
            cell += f" ({fast / r['median_ms']:.2f}x)"
        ts = row.get("tune", {}).get("tune_s")
        out += [cell, "err" if ts is None else f"{ts:.0f}"]
    errs = [row.get(rt, {}).get("err") for rt in peers + (["tuned"] if tuning else [])]
    worst = max((e for e in errs if e is not None), default=None)
    out.append(f"{worst:.1e}" if worst is not None else "-")
    return out


def columns(peers: list[str], tuning: bool) -> list[str]:
    cols = ["model", "b", "t", "mt call ms", "mt w/o host ms", "GFLOP/s", "%peak call / w/o",
            "1st call s"]
    cols += [f"{TITLES[p]} ms (/call)" for p in peers]
    cols += ["best(ORT,OV)/call", "best/w-o host"]
    if tuning:
        cols += ["tuned ms (w-o host/tuned)", "tune s"]
    return cols + ["max rel err"]


class Report:
    """Rows as they come (one line each), then the table, JSON and markdown."""

    def __init__(self, runtimes: list[str], tuning: bool = False, clock: str = "wall"):
        from rich.console import Console
        if clock not in KEYS:
            raise ValueError(f"clock: expected one of {sorted(KEYS)}; got {clock!r}")
        self.peers = [r for r in runtimes if r != "megtrace"]
        self.tuning = tuning
        self.clock = clock
        self.rows: list[dict] = []
        self.overhead: dict | None = None
        self.seconds = 0.0
        self.load: tuple[float, float, float] | None = None
        self.console = Console(width=250)

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        head = columns(self.peers, self.tuning)
        self.say(" | ".join(f"{h}: {c}" for h, c in zip(
            head, cells(row, self.peers, self.tuning, self.clock))))

    def table(self) -> Any:
        from rich.table import Table
        t = Table(title=f"megtrace vs peers (median {self.clock} ms per call; ratio = other / "
                        "megtrace's default call, >1: megtrace faster)")
        for i, col in enumerate(columns(self.peers, self.tuning)):
            t.add_column(col, justify="left" if i == 0 else "right")
        for row in self.rows:
            t.add_row(*cells(row, self.peers, self.tuning, self.clock))
        return t

    def problems(self) -> list[str]:
        out = []
        for row in self.rows:
            for rt in ["megtrace"] + self.peers + (["tune", "tuned"] if self.tuning else []):
                r = row.get(rt, {})
                if "error" in r:
                    out.append(f"{row['model']} b{row['batch']} t{row['threads']} {rt}: "
                               f"{r['error']}")
                elif "missing" in r and row is self.rows[0]:
                    out.append(f"{rt}: not installed ({r['missing']})")
        return out

    def overhead_text(self) -> str | None:
        over = self.overhead
        if over is None:
            return None
        if "call_us" not in over:
            return f"__call__ overhead: {over.get('error')}"
        c = over["call_us"]
        return (f"__call__ of a tiny traced MLP (64-128-64-10, batch 1), us per call: VM "
                f"alone {c['vm']:.1f}; CompiledGraph {c['compiled_graph']:.1f}; trace "
                f"without_host=True {c['trace_without_host']:.1f} "
                f"(+{c['trace_without_host'] - c['vm']:.1f}); replay {c['trace_replay']:.1f} "
                f"(+{c['trace_replay'] - c['vm']:.1f})")

    def footer(self) -> list[str]:
        lines = self.problems()
        if self.overhead_text():
            lines.append(self.overhead_text())
        if self.load:
            lines.append(f"load average at the end: {self.load[0]:.2f} {self.load[1]:.2f} "
                         f"{self.load[2]:.2f}; total {self.seconds:.0f} s")
        return lines

    def print(self) -> None:
        self.console.print(self.table())
        for line in self.footer():
            self.say(line)

    def markdown(self) -> str:
        head = columns(self.peers, self.tuning)
        lines = [f"median {self.clock} ms per call", "",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cells(r, self.peers, self.tuning, self.clock)) + " |"
                  for r in self.rows]
        return "\n".join(lines + [""] + [f"- {x}" for x in self.footer()]) + "\n"

    def write(self, prefix: Path) -> None:
        prefix.with_name(prefix.name + ".json").write_text(json.dumps(
            {"rows": self.rows, "overhead": self.overhead, "load": self.load,
             "seconds": self.seconds, "runtimes": ["megtrace"] + self.peers,
             "tuning": self.tuning}, indent=1, default=str))
        prefix.with_name(prefix.name + ".md").write_text(self.markdown())


def load(path: Path, clock: str = "wall") -> Report:
    """A Report of an earlier run's JSON (bench_models.py --render)."""
    data = json.loads(Path(path).read_text())
    rows = data["rows"]
    runtimes = data.get("runtimes") or ["megtrace"] + [
        rt for rt in TITLES if any(rt in r for r in rows)]
    report = Report(runtimes, tuning=data.get("tuning", False), clock=clock)
    report.rows, report.overhead = rows, data.get("overhead")
    report.seconds, report.load = data.get("seconds", 0.0), data.get("load")
    return report
