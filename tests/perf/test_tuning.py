"""MetaSchedule tuning with a tiny budget: trials really run (database records), the
tuned build matches, export and the CLI use the records, bad input fails clearly."""
import json

import numpy as np
import pytest
from conftest import rel_err
from models import MLP

import megtrace as mge
from megtrace.relay_bridge.export import export, load_exported
from megtrace.relay_bridge.tuning import compile_tuned, tune

from .helpers import traced

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mlp():
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    net = MLP().eval()
    return net, x, traced(net, x)


def _records(store_dir):
    path = store_dir / "database_tuning_record.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_tiny_budget_runs_trials_and_builds(mlp, tmp_path, capsys):
    net, x, f = mlp
    summary = tune(f, work_dir=tmp_path, trials=2, num_threads=2, base="default")
    store = tmp_path / summary.target_key
    assert len(summary.tasks) == 3                      # three fused dense+bias(+relu)
    assert summary.total_trials > 0
    records = _records(store)               # [workload, [trace, run_secs, target, args]]
    assert 0 < len(records) <= summary.total_trials
    assert any(0 < min(rec[1][1]) < 1.0 for rec in records)     # measured, in seconds
    assert any(t.best_us is not None for t in summary.tasks)
    assert all(t.kept is not None for t in summary.tasks)       # each was re-measured
    assert summary.tuned_ms is not None and summary.untuned_ms is not None
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("tune [")]
    assert lines and "trials" in lines[-1]
    assert "3 tasks" in str(summary)

    want = net(mge.tensor(x)).numpy()
    compiled = compile_tuned(f.graph, None, tmp_path, num_threads=2)
    assert compiled.pipeline == "tuned"
    assert rel_err(compiled(x)[0], want) <= 1e-5
    done = export(f, tmp_path / "tuned.so", tuning_dir=tmp_path, num_threads=2)
    manifest = json.loads(done.manifest.read_text())
    assert manifest["pipeline"] == "tuned" and manifest["num_threads"] == 2
    assert rel_err(load_exported(done.library)(x)[0], want) <= 1e-5


def test_cli_tunes_a_model_file_and_exports(mlp, tmp_path, capsys):
    from megtrace.cli.tune import main
    net, x, f = mlp
    f.dump(tmp_path / "mlp.mge", arg_names=["data"], output_names=["out"])
    rc = main([str(tmp_path / "mlp.mge"), "--trials", "1", "--work-dir", str(tmp_path / "w"),
               "--threads", "1", "--base", "default", "--no-compare", "--no-keep-check",
               "--export", str(tmp_path / "mlp.so")])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "tuning of 3 tasks" in out.out and "exported" in out.out
    model = load_exported(tmp_path / "mlp.so")
    assert rel_err(model(data=x)[0], net(mge.tensor(x)).numpy()) <= 1e-5
    assert main([str(tmp_path / "missing.mge"), "--work-dir", str(tmp_path)]) == 1
    assert "no such file" in capsys.readouterr().err


def test_nothing_to_tune_with_the_rules(mlp, tmp_path):
    from megtrace.relay_bridge.executable import rules_wanted
    from megtrace.relay_bridge.targets import resolve
    if not rules_wanted(resolve(None), None):
        pytest.skip("CPU rules are switched off (MEGTRACE_CPU_RULES=0)")
    _, _, f = mlp
    summary = tune(f, work_dir=tmp_path, trials=1, base="rules", progress=False)
    if summary.tasks:
        pytest.skip("the CPU rules leave some of the MLP to the generic schedule")
    assert summary.total_trials == 0 and "nothing to tune" in summary.note
    compiled = compile_tuned(f.graph, None, tmp_path)          # builds with no records
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    assert rel_err(compiled(x)[0], f(mge.tensor(x)).numpy()) <= 1e-5


def test_bad_input_gives_clear_errors(mlp, tmp_path):
    _, _, f = mlp
    with pytest.raises(ValueError, match="trials"):
        tune(f, work_dir=tmp_path, trials=0)
    with pytest.raises(ValueError, match="base"):
        tune(f, work_dir=tmp_path, base="fast")
    with pytest.raises(ValueError, match="cost_model"):
        tune(f, work_dir=tmp_path, cost_model="gbm")
    with pytest.raises(ValueError, match="num_threads"):
        tune(f, work_dir=tmp_path, num_threads=-1)
    with pytest.raises(ValueError, match="target: tuning supports llvm"):
        tune(f, "cuda-sm90", work_dir=tmp_path)
    with pytest.raises(ValueError, match="remote"):
        tune(f, "aarch64", work_dir=tmp_path)
    with pytest.raises(TypeError, match="model"):
        tune([1, 2], work_dir=tmp_path)
    with pytest.raises(TypeError, match="work_dir"):
        tune(f, work_dir=3)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="work_dir: .* is a file"):
        tune(f, work_dir=tmp_path / "file")
    with pytest.raises(ValueError, match="work_dir: no tuning for"):
        compile_tuned(f.graph, None, tmp_path / "empty")
    with pytest.raises(ValueError, match="work_dir"):
        compile_tuned(f.graph)
