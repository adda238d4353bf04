"""What `tune` shows while it works: a live bar where the console can redraw, lines
elsewhere, a summary table, and why a run will gain little, said before it starts."""
import io
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from megtrace.relay_bridge.tuning import TaskReport, TuneSummary, _worth_note
from megtrace.relay_bridge.tuning_progress import (LineDisplay, NoDisplay, Progress,
                                                   RichDisplay, TaskStats, make_display)

ROOT = Path(__file__).resolve().parents[2]


def _measured(seconds):
    return (SimpleNamespace(error_msg=None), SimpleNamespace(error_msg=None, run_secs=[seconds]))


def _progress(display):
    p = Progress(4, [TaskStats("fused_conv2d_add_relu", 2e6), TaskStats("fused_dense", 0.0)],
                 display=display)
    b, r = _measured(2e-5)
    p.record(0, [b, b], [r, _measured(1e-5)[1]], [False, False])
    return p


def test_lines_where_the_console_cannot_redraw():
    out = io.StringIO()
    display = make_display(True, Console(file=out))
    assert isinstance(display, LineDisplay)
    assert isinstance(make_display(False), NoDisplay)
    display = LineDisplay(out)
    display.phase("lowering the graph and extracting tasks")
    _progress(display)
    lines = out.getvalue().splitlines()
    assert lines[0] == "tune: lowering the graph and extracting tasks"
    assert lines[1].startswith("tune [0/2 tasks] fused_conv2d_add_relu: 2/4 trials, "
                               "best 10.00 us (200.0 GFLOP/s); 2/8 trials")


def test_live_bar_in_a_terminal():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    display = make_display(True, console)
    assert isinstance(display, RichDisplay)
    p = _progress(display)
    p.tasks[1].finished = True                  # its search space ran out after 0 trials
    display.update(p, 0)
    display.close()
    text = out.getvalue()
    assert "tune [1/2 tasks]" in text and "2/4 trials" in text     # budget less task 1's
    assert "fused_conv2d_add_relu: best 10.00 us" in text and "ETA" in text


def test_summary_table_and_repr():
    s = TuneSummary(Path("w"), "llvm", "llvm-x-t2", "rules", 2,
                    [TaskReport("fused_dense", 1e6, 8, 12.5, 20.0, 12.0, True)], 8, 3.0,
                    0.5, 0.25)
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(s)
    text = out.getvalue()
    assert "untuned us" in text and "fused_dense" in text and "yes" in text
    assert "whole model: compile_graph 0.500 ms, tuned 0.250 ms (2.00x)" in text
    assert repr(s) == "<TuneSummary 1 tasks, 8 trials, 3 s, 2.00x>"


def test_says_why_there_is_little_to_gain():
    note = _worth_note([], ["fused_conv2d_add", "fused_conv2d_relu", "fused_dense_add"])
    assert note.startswith("nothing to tune: the CPU rules hand-schedule 3 kernel(s) "
                           "(conv2d x2, dense)")
    note = _worth_note([TaskStats("fused_unpack_reshape", 0.0)], ["fused_conv2d_add"])
    assert note.startswith("little worth tuning:") and "fused_unpack_reshape" in note
    assert _worth_note([TaskStats("fused_dense", 1e6)], ["fused_conv2d_add"]) == ""


def test_cli_tune_speaks_within_a_second(fixtures_dir, tmp_path):
    """The first line comes before TVM loads and lowers (seconds of silence before)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "megtrace.cli", "tune",
                             str(fixtures_dir / "mlp_fbs1.mge"), "--trials", "1",
                             "--work-dir", str(tmp_path), "--no-compare", "--no-keep-check"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    start = time.perf_counter()
    try:
        first = proc.stdout.readline()
        waited = time.perf_counter() - start
    finally:
        proc.kill()
        proc.communicate()
    assert first.startswith("tune: ")
    # the interpreter and megtrace import first; what follows must not wait on TVM
    assert waited < 15, waited
