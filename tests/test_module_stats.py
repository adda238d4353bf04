"""`megtrace.utils.module_stats` against real MegEngine 1.13's results on the same model
(tests/data/module_stats_model.py; golden data from make_megengine_module_stats.py)."""
import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import megtrace
import megtrace.module as M
from megtrace.utils.module_stats import module_stats, register_hook_module

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
from module_stats_model import INPUT_SHAPE, build, stats  # noqa: E402

GOLDEN = json.loads((DATA / "megengine_module_stats.json").read_text())
ROW_KEYS = {"params": ("name", "shape", "param_dim", "nbits", "size", "mean", "std",
                       "percentage", "size_cum"),
            "flops": ("name", "class_name", "input_shapes", "output_shapes", "flops_num",
                      "flops", "flops_cum", "percentage", "bar"),
            "activations": ("name", "class_name", "shape", "act_dim", "size", "size_cum",
                            "percentage", "mean", "std")}


@pytest.mark.parametrize("mode", ["input_shapes", "inputs"])
def test_matches_megengine(mode):
    ours, theirs = stats(megtrace, mode == "inputs"), GOLDEN[mode]
    assert ours["total"] == theirs["total"]
    for kind, keys in ROW_KEYS.items():
        assert len(ours[kind]) == len(theirs[kind]), kind
        for mine, ref in zip(ours[kind], theirs[kind]):
            for k in keys:
                if k in ("flops_num",) and k in ref:
                    assert mine[k] == pytest.approx(ref[k]), (kind, ref["name"], k)
                elif k in ("mean", "std") and k in ref:   # printed with 3 digits
                    assert float(mine[k]) == pytest.approx(float(ref[k]), rel=2e-2,
                                                           abs=2e-3), (kind, ref["name"], k)
                else:
                    assert mine.get(k) == ref.get(k), (kind, ref["name"], k)


def test_totals_are_independent_counts():
    """Parameter totals are the model's distinct Parameters, counted without module_stats."""
    net = build(megtrace)
    total, _ = module_stats(net, input_shapes=INPUT_SHAPE, logging_to_stdout=False)
    distinct = {id(p): p for p in net.parameters()}
    assert total.param_dims == sum(int(np.prod(p.shape)) for p in distinct.values())
    assert total.param_size == 4 * total.param_dims


def test_register_hook_module_and_errors():
    class Scale(M.Module):
        def forward(self, x):
            return x * 2

    class Net(M.Module):
        def __init__(self):
            super().__init__()
            self.scale = Scale()

        def forward(self, x):
            return self.scale(x)

    register_hook_module(Scale)
    try:
        _, details = module_stats(Net(), input_shapes=(1, 3), logging_to_stdout=False)
        assert [d["name"] for d in details.activations[:-1]] == ["scale"]
    finally:
        from megtrace.utils import module_stats as ms
        ms.hook_modules.remove(Scale)
    with pytest.raises(TypeError, match="should in"):
        register_hook_module(3)
    assert module_stats(Net()) is None      # neither inputs nor input_shapes: logged


LOG = json.loads((DATA / "megengine_module_stats_log.json").read_text())


def _logged(**kwargs) -> list[str]:
    """The messages module_stats logs (MegEngine's golden: make_megengine_module_stats_log.py)."""
    from megtrace.utils import module_stats as ms
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    ms.logger.addHandler(handler)
    try:
        module_stats(build(megtrace), input_shapes=INPUT_SHAPE, **kwargs)
    finally:
        ms.logger.removeHandler(handler)
    return messages


def _cells(message: str) -> tuple[str, list[list[str]]]:
    """A logged table's title and cells, cut at the columns its dashed rule marks."""
    title, rule, *lines = message.split("\n")
    assert lines[-1] == rule
    spans, start = [], 0
    for dashes in rule.split("  "):
        spans.append((start, start + len(dashes)))
        start += len(dashes) + 2
    return title, [[line[a:b].strip() for a, b in spans] for line in lines[:-1]]


def test_logs_megengines_plain_tables():
    """Full names and numbers in plain text (no terminal needed), MegEngine's layout;
    parameter means and stds agree to their printed digits."""
    ours, theirs = _logged(logging_to_stdout=True), LOG["logging_to_stdout"]
    assert len(ours) == len(theirs) == 4
    for mine, ref in zip(ours, theirs):
        if not mine.startswith("param stats"):
            assert mine == ref
            continue
        (title, rows), (ref_title, ref_rows) = _cells(mine), _cells(ref)
        assert title == ref_title and len(rows) == len(ref_rows) and rows[0] == ref_rows[0]
        approx = [rows[0].index("mean"), rows[0].index("std")]
        for row, ref_row in zip(rows[1:], ref_rows[1:]):
            for i, (a, b) in enumerate(zip(row, ref_row)):
                if i in approx and b:
                    assert float(a) == pytest.approx(float(b), rel=2e-2, abs=2e-3)
                else:
                    assert a == b, (row[0], ref_row[i])


def test_logs_the_summary_without_logging_to_stdout():
    assert _logged(logging_to_stdout=False) == LOG["quiet"]
