"""Coverage-guided fuzzing of megtrace's byte readers with atheris (libFuzzer).

    MEGTRACE_FUZZ_SEEDS=/tmp/seeds python tests/fuzz/fuzz_readers.py fbs_v2 \
        -max_total_time=600 -max_len=200000 -artifact_prefix=crash-
    python tests/fuzz/fuzz_readers.py --list

Seeds come from tests/fuzz/targets.py (MegEngine fixtures and our own dumps), written to
$MEGTRACE_FUZZ_SEEDS and used as the corpus (without it libFuzzer starts from an empty
input and rarely gets past the magic bytes), plus any corpus folders given after the
target; models are larger than libFuzzer's default -max_len of 4096 bytes. An input that raises anything but the reader's
own errors, crashes or hangs is written as an artifact; add it to
tests/fuzz/crashes/<target>/ so test_fuzz_readers.py replays it forever.
"""
import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports(include=["fbs", "megtrace", "relay_bridge"]):
    import megtrace  # noqa: F401
    import megtrace.fbs.reader  # noqa: F401
    import megtrace.fbs.to_graph  # noqa: F401
    import megtrace.relay_bridge.deploy  # noqa: F401
    import megtrace.relay_bridge.tuning_store  # noqa: F401

from fuzz.targets import check_one, targets  # noqa: E402


def main() -> None:
    all_targets = targets()
    if len(sys.argv) < 2 or sys.argv[1] == "--list":
        print(" ".join(all_targets))
        return
    target = all_targets[sys.argv[1]]
    seed_dir = os.environ.get("MEGTRACE_FUZZ_SEEDS")
    if seed_dir:
        os.makedirs(seed_dir, exist_ok=True)
        for i, seed in enumerate(target.seeds()):
            with open(os.path.join(seed_dir, f"seed{i}"), "wb") as f:
                f.write(seed)
    for seed in target.seeds():       # warm up (imports TVM...) outside libFuzzer's timeout
        check_one(target, seed)
    argv = [sys.argv[0]] + sys.argv[2:] + ([seed_dir] if seed_dir else [])
    atheris.Setup(argv, lambda data: check_one(target, data))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
