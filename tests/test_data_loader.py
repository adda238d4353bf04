"""megtrace.data: samplers, Collator and DataLoader against NumPy (MegEngine 1.13 semantics)."""
import collections
import time

import numpy as np
import pytest

from megtrace.data import (Collator, DataLoader, Infinite, RandomSampler, ReplacementSampler, SequentialSampler,
                           StreamSampler)
from megtrace.data.dataset import ArrayDataset, ConcatDataset, Dataset, StreamDataset
from megtrace.data.transform import Transform


def _arrays(n=10):
    data = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
    label = np.arange(n, dtype=np.int32) * 7
    return data, label


def test_sequential_batches_and_len():
    data, label = _arrays(10)
    ds = ArrayDataset(data, label)
    for drop_last, expected in ((False, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]), (True, [[0, 1, 2, 3], [4, 5, 6, 7]])):
        sampler = SequentialSampler(ds, batch_size=4, drop_last=drop_last)
        assert list(sampler) == expected and len(sampler) == len(expected)
        loader = DataLoader(ds, sampler=sampler)
        batches = list(loader)
        assert len(loader) == len(expected) == len(batches)
        for (x, y), idx in zip(batches, expected):
            assert isinstance(x, np.ndarray) and x.dtype == np.float32
            np.testing.assert_array_equal(x, data[idx])
            np.testing.assert_array_equal(y, label[idx])


def test_random_and_replacement_samplers_follow_numpy_randomstate():
    ds = ArrayDataset(np.arange(9))
    got = [i for b in RandomSampler(ds, batch_size=2, seed=5) for i in b]
    assert got == np.random.RandomState(5).permutation(9).tolist()
    w = [1, 0, 0, 3, 0, 0, 0, 0, 1]
    got = [i for b in ReplacementSampler(ds, batch_size=3, weights=w, seed=1) for i in b]
    assert got == np.random.RandomState(1).choice(9, size=9, replace=True, p=np.array(w) / 5).tolist()
    assert set(got) <= {0, 3, 8}


def test_world_size_scatter_pads_and_strides():
    ds = ArrayDataset(np.arange(7))
    parts = [[i for b in SequentialSampler(ds, batch_size=1, world_size=3, rank=r) for i in b] for r in range(3)]
    padded = list(range(7)) + [0, 1]
    assert parts == [padded[r::3] for r in range(3)]


def test_infinite_restarts_and_forwards_attributes():
    sampler = Infinite(SequentialSampler(ArrayDataset(np.arange(3)), batch_size=2))
    it = iter(sampler)
    assert [next(it) for _ in range(5)] == [[0, 1], [2], [0, 1], [2], [0, 1]]
    assert sampler.batch_size == 2 and len(sampler) == np.iinfo(np.int64).max


@pytest.mark.parametrize("kwargs,message", [
    (dict(batch_size=0), "batch_size should be a positive integer value, but got batch_size=0"),
    (dict(batch_size=True), "batch_size should be a positive integer value"),
    (dict(drop_last=1), "drop_last should be a boolean value, but got drop_last=1"),
    (dict(batch_size=20), "num_samples should be greater than batch_size"),
    (dict(indices=5), "indices should be None or a sequence"),
])
def test_sampler_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequentialSampler(ArrayDataset(np.arange(10)), **kwargs)


def test_loader_bad_arguments():
    ds = ArrayDataset(np.arange(4))
    with pytest.raises(ValueError, match="num_workers should not be negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="timeout should not be negative"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(AssertionError, match="types of dataset and sampler do not match"):
        DataLoader(ds, sampler=StreamSampler(2))
    with pytest.raises(ValueError, match="lengths of input arrays are inconsistent"):
        ArrayDataset(np.arange(3), np.arange(4))


def test_collator_structures():
    Point = collections.namedtuple("Point", "x y")
    out = Collator().apply([{"a": np.ones(2), "b": 1.5, "c": "s", "p": Point(1, np.int8(2))},
                            {"a": np.zeros(2), "b": 2.5, "c": "t", "p": Point(3, np.int8(4))}])
    np.testing.assert_array_equal(out["a"], [[1, 1], [0, 0]])
    assert out["b"].dtype == np.float64 and out["c"] == ["s", "t"]
    assert isinstance(out["p"], Point) and out["p"].y.dtype == np.int8
    np.testing.assert_array_equal(out["p"].x, [1, 3])
    with pytest.raises(TypeError, match="default_collator: inputs must contain numpy arrays"):
        Collator().apply([object(), object()])


class _Double(Transform):
    def apply(self, sample):
        return tuple(np.asarray(x) * 2 for x in sample)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_transform_and_workers_keep_order(num_workers):
    data, label = _arrays(11)
    ds = ConcatDataset([ArrayDataset(data[:5], label[:5]), ArrayDataset(data[5:], label[5:])])
    loader = DataLoader(ds, sampler=RandomSampler(ds, batch_size=3, seed=2), transform=_Double(),
                        num_workers=num_workers)
    order = [i for b in RandomSampler(ds, batch_size=3, seed=2) for i in b]
    got = list(loader)
    assert len(got) == 4
    np.testing.assert_array_equal(np.concatenate([x for x, _ in got]), data[order] * 2)
    np.testing.assert_array_equal(np.concatenate([y for _, y in got]), label[order] * 2)


class _Failing(Dataset):
    def __init__(self):
        pass

    def __getitem__(self, i):
        if i == 3:
            raise KeyError("bad sample")
        return (np.float32(i),)

    def __len__(self):
        return 6


class _Slow(_Failing):
    def __getitem__(self, i):
        time.sleep(3)
        return (np.float32(i),)


def test_worker_error_and_timeout():
    with pytest.raises(RuntimeError, match="Caught KeyError in DataLoader worker process"):
        list(DataLoader(_Failing(), sampler=SequentialSampler(_Failing(), batch_size=2), num_workers=2))
    with pytest.raises(KeyError):
        list(DataLoader(_Failing(), sampler=SequentialSampler(_Failing(), batch_size=2)))
    with pytest.raises(RuntimeError, match="dataloader timeout"):
        next(iter(DataLoader(_Slow(), num_workers=1, timeout=1)))


class _Stream(StreamDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield np.full(2, i, np.int32), i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stream_batches(num_workers):
    loader = DataLoader(_Stream(7), sampler=StreamSampler(batch_size=3), num_workers=num_workers)
    got = list(loader)
    assert [b[1].tolist() for b in got] == [[0, 1, 2], [3, 4, 5], [6]]
    np.testing.assert_array_equal(got[0][0], [[0, 0], [1, 1], [2, 2]])
    with pytest.raises(AssertionError, match="can not get item from StreamDataset by index"):
        _Stream(1)[0]


def test_preload_gives_tensors():
    from megtrace import Tensor
    data, label = _arrays(4)
    x, y = next(iter(DataLoader(ArrayDataset(data, label), sampler=SequentialSampler(ArrayDataset(data), 2),
                                preload=True)))
    assert isinstance(x, Tensor) and isinstance(y, Tensor)
    np.testing.assert_array_equal(x.numpy(), data[:2])


def test_collator_stacks_string_arrays_and_refuses_object_arrays():
    """MegEngine's default collator refuses only object arrays (dtype codes 'O'/'a');
    arrays of str or bytes stack like any other (checked in MegEngine 1.13)."""
    from megtrace.data.collator import Collator
    words = [np.array(["ab", "c"]), np.array(["d", "efg"])]
    out = Collator().apply(words)
    assert out.dtype.kind == "U" and out.tolist() == [["ab", "c"], ["d", "efg"]]
    raw = Collator().apply([np.array([b"x"]), np.array([b"yz"])])
    assert raw.dtype.kind == "S" and raw.shape == (2, 1)
    with pytest.raises(TypeError):
        Collator().apply([np.array([{}], dtype=object), np.array([{}], dtype=object)])


def test_data_packages_expose_their_submodules_as_megengine_does():
    """`from .vision import *` leaves MegEngine's submodules on the packages (MegEngine
    1.13: dataset.mnist, dataset.coco, transform.functional, ...)."""
    import types

    import megtrace.data.dataset as D
    import megtrace.data.transform as T
    modules = lambda pkg: sorted(n for n in dir(pkg) if isinstance(getattr(pkg, n), types.ModuleType))
    assert modules(D) == ["cifar", "cityscapes", "coco", "folder", "imagenet", "meta_dataset",
                          "meta_vision", "mnist", "objects365", "utils", "vision", "voc"]
    assert modules(T) == ["functional", "meta_transform", "transform", "vision"]
