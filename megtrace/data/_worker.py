"""Worker-process side of DataLoader: fetch, transform and collate batches sent by index."""
from __future__ import annotations

import os
import queue
import random
import traceback
from typing import Any

import numpy as np

POLL_S = 1.0


class WorkerInfo:
    """Read-only facts about the current worker process (``idx``, ``worker``, ``seed``)."""

    def __init__(self, **facts: Any):
        for key, value in facts.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_keys", tuple(facts))

    def __setattr__(self, key, value):
        raise RuntimeError("Cannot assign attributes to {} objects".format(type(self).__name__))

    def __repr__(self):
        return "{}({})".format(type(self).__name__, ", ".join("{}={}".format(k, getattr(self, k)) for k in self._keys))


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The WorkerInfo of this worker process, None in the main process."""
    return _worker_info


class WorkerError:
    """A worker's exception, carried as text so any exception type crosses the process boundary."""

    def __init__(self, type_name: str, text: str, worker_id: int):
        self.type_name, self.text, self.worker_id = type_name, text, worker_id

    def reraise(self):
        raise RuntimeError("Caught {} in DataLoader worker process {}.\nOriginal {}"
                           .format(self.type_name, self.worker_id, self.text))


class StreamEnded:
    """Sent by a stream worker whose own dataset iterator is exhausted."""

    def __init__(self, worker_id: int):
        self.worker_id = worker_id


def fetch_map(dataset, indices, transform, collator):
    items = [dataset[i] for i in indices]
    return collator.apply(transform.apply_batch(items))


def fetch_stream(source, task, transform, collator, parallel_stream: bool):
    """``task`` is the raw samples (main process reads the stream) or a list of counters (worker reads it)."""
    out = []
    for item in task:
        if parallel_stream:
            try:
                item = next(source)
            except StopIteration:
                break
        out.append(transform.apply(item))
    if not out:
        raise StopIteration
    return collator.apply(out)


def worker_loop(dataset, index_queue, result_queue, done_event, transform, collator, seed: int, worker_id: int,
                num_workers: int, datakind: str, parallel_stream: bool) -> None:
    """Serve tasks until told to stop (None), the main process dies, or ``done_event`` is set."""
    global _worker_info
    random.seed(seed)
    np.random.seed(seed % 2**32)
    parent = os.getppid()
    source = None
    if datakind == "stream":
        _worker_info = WorkerInfo(idx=worker_id, worker=num_workers, seed=seed)
        if parallel_stream:
            source = iter(dataset)
    ended = False
    while os.getppid() == parent:
        try:
            task = index_queue.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if task is None:
            break
        if done_event.is_set() or ended:
            continue
        seq, payload = task
        try:
            if datakind == "stream":
                data = fetch_stream(source, payload, transform, collator, parallel_stream)
            else:
                data = fetch_map(dataset, payload, transform, collator)
        except StopIteration:
            data, ended = StreamEnded(worker_id), True
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the main process
            data = WorkerError(type(exc).__name__, traceback.format_exc(), worker_id)
        try:
            result_queue.put((seq, data))
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable batch
            result_queue.put((seq, WorkerError(type(exc).__name__, traceback.format_exc(), worker_id)))
