"""DataLoader (MegEngine 1.13's megengine.data.DataLoader): sampler -> dataset -> transform -> collator.

Batches are NumPy structures; with ``preload=True`` arrays become Tensors. Worker processes (``num_workers``)
return batches in sampler order; ``timeout`` bounds the wait for one batch.
"""
from __future__ import annotations

import collections.abc
import itertools
import multiprocessing
import queue
import threading
import time
import _thread

import numpy as np

from ..logger import get_logger
from ..tensor import Tensor
from ._worker import StreamEnded, WorkerError, WorkerInfo, get_worker_info, worker_loop
from .collator import Collator
from .dataset import Dataset, StreamDataset
from .sampler import MapSampler, Sampler, SequentialSampler, StreamSampler
from .transform import PseudoTransform, Transform

__all__ = ["DataLoader", "WorkerInfo", "get_worker_info"]

logger = get_logger(__name__)
POLL_S = 1.0  # how often a blocked wait checks that the workers are alive


def raise_timeout_error():
    raise RuntimeError("dataloader timeout")


class DataLoader:
    """Iterate mini-batches of ``dataset`` drawn by ``sampler`` (default: sequential, batch size 1)."""

    def __init__(self, dataset: Dataset, sampler: Sampler = None, transform: Transform = None,
                 collator: Collator = None, num_workers: int = 0, timeout: int = 0, preload: bool = False,
                 parallel_stream: bool = False):
        if num_workers < 0:
            raise ValueError("num_workers should not be negative")
        if timeout < 0:
            raise ValueError("timeout should not be negative")
        self.dataset = dataset
        self.num_workers = num_workers
        self.timeout = timeout
        self.preload = preload
        self.parallel_stream = parallel_stream
        if isinstance(dataset, StreamDataset):
            self.sampler = sampler if sampler else StreamSampler(batch_size=1)
            assert isinstance(self.sampler, StreamSampler), "types of dataset and sampler do not match"
            if not parallel_stream and num_workers > 1:
                logger.warning("Data time will be affected by getting origin-data, please set parallel_stream "
                               "in order to speed up dataloader!")
            self.datakind = "stream"
        else:
            assert isinstance(dataset, Dataset), "Can not recognize this kind of dataset: %s" % type(dataset)
            self.sampler = sampler if sampler else SequentialSampler(dataset, batch_size=1, drop_last=False)
            assert isinstance(self.sampler, MapSampler), "types of dataset and sampler do not match"
            self.datakind = "map"
        self.transform = PseudoTransform() if transform is None else transform
        self.collator = Collator() if collator is None else collator

    def __iter__(self):
        if self.datakind == "stream":
            return _ParallelStreamIter(self) if self.num_workers else _SerialStreamIter(self)
        return _ParallelMapIter(self) if self.num_workers else _SerialMapIter(self)

    def __len__(self):
        return len(self.sampler)


def _to_tensors(batch):
    """What preload hands out: every array of the batch structure as a Tensor."""
    if isinstance(batch, np.ndarray):
        return Tensor(batch)
    if isinstance(batch, collections.abc.Mapping):
        return {key: _to_tensors(value) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_to_tensors(value) for value in batch))
    if isinstance(batch, collections.abc.Sequence) and not isinstance(batch, (str, bytes)):
        return [_to_tensors(value) for value in batch]
    return batch


class _BaseIter:
    def __init__(self, loader: DataLoader):
        self.dataset = loader.dataset
        self.sampler = loader.sampler
        self.transform = loader.transform
        self.collator = loader.collator
        self.num_workers = loader.num_workers
        self.timeout = loader.timeout
        self.preload = loader.preload
        self.parallel_stream = loader.parallel_stream
        self.datakind = loader.datakind

    def __iter__(self):
        return self

    def __next__(self):
        batch = self._get_next_batch()
        return _to_tensors(batch) if self.preload else batch

    def _get_next_batch(self):
        raise NotImplementedError


class _SerialMapIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._sampler_iter = iter(self.sampler)

    def __len__(self):
        return len(self.sampler)

    def _get_next_batch(self):
        indices = next(self._sampler_iter)
        items = [self.dataset[i] for i in indices]
        return self.collator.apply(self.transform.apply_batch(items))


class _SerialStreamIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._source = iter(self.dataset)

    def _next_raw(self, start: float):
        if self.timeout <= 0:
            return next(self._source)
        timer = threading.Timer(max(self.timeout - (time.time() - start), 0.0), _thread.interrupt_main)
        timer.start()
        try:
            return next(self._source)
        except KeyboardInterrupt:
            if time.time() - start >= self.timeout:
                raise_timeout_error()
            raise
        finally:
            timer.cancel()

    def _get_next_batch(self):
        out = []
        start = time.time()
        while len(out) < self.sampler.batch_size:
            try:
                raw = self._next_raw(start)
            except StopIteration:
                if out:
                    break
                raise
            out.append(self.transform.apply(raw))
        return self.collator.apply(out)


class _ParallelIter(_BaseIter):
    """Keeps 2 tasks per worker in flight and hands results out in task order."""

    def __init__(self, loader):
        super().__init__(loader)
        ctx = multiprocessing.get_context("fork")
        self._results = ctx.Queue()
        self._done = ctx.Event()
        self._index_queues, self._workers = [], []
        self._alive = [True] * self.num_workers
        self._shutdown = False
        seed = int(np.random.randint(0, 2**31))
        for wid in range(self.num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            proc = ctx.Process(target=worker_loop, daemon=True,
                               args=(self.dataset, index_queue, self._results, self._done, self.transform,
                                     self.collator, seed + wid, wid, self.num_workers, self.datakind,
                                     self.parallel_stream))
            proc.start()
            self._index_queues.append(index_queue)
            self._workers.append(proc)
        self._cycle = itertools.cycle(range(self.num_workers))
        self._sent = self._received = 0
        self._pending = {}  # seq -> worker id, or (worker id, data) once arrived out of order
        for _ in range(2 * self.num_workers):
            self._put_task()

    def _next_task(self):
        raise NotImplementedError

    def _put_task(self) -> None:
        try:
            task = self._next_task()
        except StopIteration:
            return
        for _ in range(self.num_workers):
            wid = next(self._cycle)
            if self._alive[wid]:
                break
        else:
            return
        self._index_queues[wid].put((self._sent, task))
        self._pending[self._sent] = (wid,)
        self._sent += 1

    def _get_result(self):
        deadline = time.time() + self.timeout if self.timeout > 0 else None
        while True:
            wait = POLL_S if deadline is None else max(min(POLL_S, deadline - time.time()), 0.01)
            try:
                return self._results.get(timeout=wait)
            except queue.Empty:
                self._check_workers()
                if deadline is not None and time.time() >= deadline:
                    self._shutdown_workers()
                    raise_timeout_error()

    def _check_workers(self) -> None:
        dead = [(wid, w) for wid, w in enumerate(self._workers) if self._alive[wid] and not w.is_alive()]
        if dead:
            self._shutdown_workers()
            raise RuntimeError("DataLoader worker (worker(s): {} , pid(s): {}) exited unexpectedly, exitcode(s): {}"
                               .format(", ".join(str(wid) for wid, _ in dead), ", ".join(str(w.pid) for _, w in dead),
                                       ", ".join(str(w.exitcode) for _, w in dead)))

    def _deliver(self, data):
        self._received += 1
        self._put_task()
        if isinstance(data, WorkerError):
            self._shutdown_workers()
            data.reraise()
        return data

    def _get_next_batch(self):
        while True:
            while self._received < self._sent:
                info = self._pending[self._received]
                if len(info) == 2 or self._alive[info[0]]:
                    break
                del self._pending[self._received]  # its worker's stream ended: nothing will come
                self._received += 1
            else:
                self._shutdown_workers()
                raise StopIteration
            info = self._pending[self._received]
            if len(info) == 2:
                del self._pending[self._received]
                return self._deliver(info[1])
            seq, data = self._get_result()
            if isinstance(data, StreamEnded):
                self._alive[data.worker_id] = False
                self._index_queues[data.worker_id].put(None)
                self._pending.pop(seq, None)
                if seq == self._received:
                    self._received += 1
                self._put_task()
                continue
            if seq != self._received:
                self._pending[seq] = (self._pending[seq][0], data)
                continue
            del self._pending[seq]
            return self._deliver(data)

    def _shutdown_workers(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self._done.set()
        for wid, index_queue in enumerate(self._index_queues):
            try:
                index_queue.put(None)
            except (OSError, ValueError):
                pass
        for proc in self._workers:
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
        for index_queue in self._index_queues:
            index_queue.close()
        self._results.cancel_join_thread()
        self._results.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass


class _ParallelMapIter(_ParallelIter):
    def __init__(self, loader):
        self._sampler_iter = iter(loader.sampler)
        super().__init__(loader)

    def __len__(self):
        return len(self.sampler)

    def _next_task(self):
        return next(self._sampler_iter)


class _ParallelStreamIter(_ParallelIter):
    def __init__(self, loader):
        self._sampler_iter = iter(loader.sampler)
        self._source = None if loader.parallel_stream else iter(loader.dataset)
        super().__init__(loader)

    def _next_task(self):
        if self.parallel_stream:
            return next(self._sampler_iter)
        start = time.time()
        task = [next(self._source)]
        if self.timeout > 0 and time.time() - start > self.timeout:
            raise_timeout_error()
        for item in itertools.islice(self._source, self.sampler.batch_size - 1):
            task.append(item)  # a stream that ends mid-batch gives a last, shorter batch
        return task
