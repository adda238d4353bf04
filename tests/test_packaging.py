"""`pip install megtrace` claims only the name `megtrace`: fbs/ and relay_bridge/ ship inside it.

The repository keeps fbs/ and relay_bridge/ as top-level folders (the design's layout); the
symlinks megtrace/fbs and megtrace/relay_bridge make them the subpackages megtrace.fbs and
megtrace.relay_bridge. A wheel must hold real files under megtrace/ and nothing beside it.
"""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True)
    (wheel,) = out.glob("megtrace-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


@pytest.mark.slow
def test_wheel_installs_only_megtrace(wheel_names):
    top = {name.split("/")[0] for name in wheel_names}
    assert {t for t in top if not t.endswith((".dist-info", ".data"))} == {"megtrace"}


@pytest.mark.slow
def test_wheel_carries_the_bridge_and_the_format(wheel_names):
    names = set(wheel_names)
    for needed in ("megtrace/fbs/reader.py", "megtrace/fbs/generated/Model.py",
                   "megtrace/fbs/schema/model_v2.fbs", "megtrace/fbs/generated/SCHEMA_SHA256",
                   "megtrace/relay_bridge/build.py", "megtrace/relay_bridge/deploy.py",
                   "megtrace/relay_bridge/cpu/__init__.py"):
        assert needed in names, needed


def test_subpackages_are_the_repository_folders():
    import megtrace.fbs
    import megtrace.relay_bridge
    assert Path(megtrace.fbs.__file__).resolve().parent == ROOT / "fbs"
    assert Path(megtrace.relay_bridge.__file__).resolve().parent == ROOT / "relay_bridge"
    assert "fbs" not in sys.modules and "relay_bridge" not in sys.modules
