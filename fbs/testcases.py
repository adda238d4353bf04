"""The `mgbtest0` container: "mgbtest0", a uint32 count N, the model, then N testcase
graphs (FBS_V2), each made of one SharedDeviceTensor per model input in sorted-name
order (what MegEngine's load_and_run feeds the model with)."""
from __future__ import annotations

import struct

import numpy as np

from megtrace.errors import FormatError

from .reader import TESTCASE_MAGIC, ModelFile, read_model
from .writer import DumpOptions, Emitter, serialize


def write_testcase(values: list[np.ndarray]) -> bytes:
    em = Emitter()
    ids = [em.shared(v) for v in values]
    data, _ = serialize(em, ids, DumpOptions(enable_metadata=False))
    return data


def write_container(model: bytes, testcases: list[dict[str, np.ndarray]],
                    input_names: list[str]) -> bytes:
    parts = [TESTCASE_MAGIC, struct.pack("<I", len(testcases)), model]
    for case in testcases:
        extra = sorted(set(case) - set(input_names))
        if extra:
            raise ValueError(f"testcase values {extra} are not inputs of the model")
        parts.append(write_testcase([case[name] for name in sorted(input_names)]))
    return b"".join(parts)


def _take_model(buf: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(buf):
        raise FormatError(f"mgbtest0: truncated at byte {pos}, a model was expected")
    size = struct.unpack_from("<I", buf, pos)[0]
    if pos + 4 + size > len(buf):
        raise FormatError(f"mgbtest0: a model at byte {pos} declares {size} bytes, the file "
                          f"has {len(buf) - pos - 4} left")
    return buf[pos:pos + 4 + size], pos + 4 + size


def read_container(buf: bytes) -> tuple[ModelFile, list[dict[str, np.ndarray]]]:
    """The model and its testcases (input name -> value)."""
    if buf[:8] != TESTCASE_MAGIC or len(buf) < 12:
        raise FormatError("not an mgbtest0 testcase file")
    count = struct.unpack_from("<I", buf, 8)[0]
    model_bytes, pos = _take_model(buf, 12)
    model = read_model(model_bytes)
    if any(not t.name for t in model.inputs):
        raise FormatError("mgbtest0: the model has an input without a name")
    names = sorted(t.name for t in model.inputs)
    cases = []
    for i in range(count):
        case_bytes, pos = _take_model(buf, pos)
        case = read_model(case_bytes)
        values = [o.tensors[0].data if o.tensors else None
                  for o in case.oprs if o.type == "SharedDeviceTensor"]
        if len(values) != len(names) or any(v is None for v in values):
            raise FormatError(f"mgbtest0: testcase {i} holds {len(values)} tensors, the model "
                              f"has {len(names)} inputs")
        cases.append(dict(zip(names, values)))
    if pos != len(buf):
        raise FormatError(f"mgbtest0: {len(buf) - pos} bytes after the last testcase")
    return model, cases
