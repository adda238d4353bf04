"""What MegEngine 1.13's module_stats logs, for tests/test_module_stats.py (run in the
megref chroot: /work/shared/megref/mpy tests/data/make_megengine_module_stats_log.py;
writes tests/data/megengine_module_stats_log.json).

The model of module_stats_model.py with input_shapes, once with logging_to_stdout=True
and once with False: the messages of the module_stats logger, in order (tabulate's plain
tables under "param stats: ", "flops stats: ", "activations stats: " and "summary"; the
summary alone with logging_to_stdout=False)."""
import io
import json
import logging
import os
import sys

import megengine
from megengine.utils import module_stats as ms

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from module_stats_model import INPUT_SHAPE, build  # noqa: E402


def logged(**kwargs) -> list[str]:
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    ms.logger.addHandler(handler)
    try:
        ms.module_stats(build(megengine), input_shapes=INPUT_SHAPE, **kwargs)
    finally:
        ms.logger.removeHandler(handler)
    return messages


golden = {"logging_to_stdout": logged(logging_to_stdout=True),
          "quiet": logged(logging_to_stdout=False)}
with open(os.path.join(HERE, "megengine_module_stats_log.json"), "w") as f:
    json.dump(golden, f, indent=1)
print({k: len(v) for k, v in golden.items()})
