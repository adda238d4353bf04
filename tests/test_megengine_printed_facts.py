"""Golden scripts that real MegEngine 1.13 ran (tests/data/show_megengine_<topic>.py, its
output in the docstring), run here with `megengine` read as `megtrace`: they must print
what MegEngine printed, line for line, except where megtrace is knowingly lenient."""
import contextlib
import io
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
# script -> {line key: megtrace's line where it knowingly differs}
SCRIPTS = {
    # NumPy scalars promote as typed operands. MegEngine refuses 64-bit ones (RuntimeError);
    # megtrace takes them as Python numbers (the tensor's dtype).
    "show_megengine_numpy_scalars.py": {"i16 + i64": "int16 [4.0, 5.0]",
                                        "f16 + f64": "float16 [2.5, 3.5]",
                                        "i32 + f64": "float32 [1.5, 2.5]"},
    # Tensor(None), set_value's warning, permutation's NumPy dtype, F.utils.copy,
    # Tensor.to(_borrow=), utils.max_recursion_limit and utils.deprecation
    "show_megengine_small_api_facts.py": {},
}


def _printed(source: str) -> dict[str, str]:
    doc = source.split('"""')[1]
    lines = [ln.strip() for ln in doc.split("CPU:", 1)[1].splitlines() if ln.strip()]
    return dict(ln.split(": ", 1) for ln in lines)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_golden_script_prints_what_megengine_printed(script):
    source = (DATA / script).read_text().replace("megengine", "megtrace")
    want = {**_printed(source), **SCRIPTS[script]}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(DATA / script), "exec"), {"__name__": "golden"})
    got = dict(ln.split(": ", 1) for ln in out.getvalue().splitlines())
    assert got == want
    assert len(got) >= 8
