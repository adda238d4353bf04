"""NumPy scalars beside tensors promote as MegEngine 1.13's do: the golden script
tests/data/show_megengine_numpy_scalars.py, run here with `megengine` read as `megtrace`,
prints what MegEngine printed (its docstring), except where MegEngine refuses 64-bit
scalars and megtrace takes them as Python numbers."""
import contextlib
import io
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "data" / "show_megengine_numpy_scalars.py"
# MegEngine: RuntimeError (no 64-bit dtypes); megtrace: the tensor's dtype, as a Python number
TAKEN_AS_NUMBERS = {"i16 + i64": "int16 [4.0, 5.0]", "f16 + f64": "float16 [2.5, 3.5]",
                    "i32 + f64": "float32 [1.5, 2.5]"}


def _megengine_lines(source: str) -> dict[str, str]:
    doc = source.split('"""')[1]
    lines = [ln.strip() for ln in doc.split("CPU:", 1)[1].splitlines() if ln.strip()]
    return dict(ln.split(": ", 1) for ln in lines)


def test_numpy_scalars_promote_as_in_megengine():
    source = SCRIPT.read_text()
    want = _megengine_lines(source)
    want.update(TAKEN_AS_NUMBERS)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source.replace("megengine", "megtrace"), str(SCRIPT), "exec"), {})
    got = dict(ln.split(": ", 1) for ln in out.getvalue().splitlines())
    assert got == want
    assert len(got) == 25
