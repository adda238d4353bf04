"""megtrace.data.dataset vision datasets on local fixture files against golden samples of the real
MegEngine 1.13 (tests/data/make_data_dataset_golden.py made tests/data/data_dataset_golden.npz)."""
import importlib.util
import os
import pickle

import numpy as np
import pytest

from megtrace.data import DataLoader, RandomSampler
from megtrace.data.dataset import CIFAR10, MNIST, ImageFolder
from megtrace.safe_pickle import UnsafePickleError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
GOLDEN = np.load(os.path.join(HERE, "data_dataset_golden.npz"))


def _script():
    spec = importlib.util.spec_from_file_location("make_data_dataset_golden",
                                                  os.path.join(HERE, "make_data_dataset_golden.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("datasets"))
    script = _script()
    script.write_fixtures(root)
    return root, script.read_all("megtrace", root)


def test_samples_match_megengine(fixtures):
    _, ours = fixtures
    assert sorted(ours) == sorted(GOLDEN.files)
    for key in GOLDEN.files:
        got, want = ours[key], GOLDEN[key]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        np.testing.assert_array_equal(got, want, err_msg=key)


def test_loader_over_mnist_batches(fixtures):
    root, ours = fixtures
    ds = MNIST(os.path.join(root, "mnist"), train=True, download=False)
    images, labels = next(iter(DataLoader(ds, sampler=RandomSampler(ds, batch_size=5, seed=1))))
    order = np.random.RandomState(1).permutation(5)
    np.testing.assert_array_equal(images, np.stack([ours["mnist_train/%d/0" % i] for i in order]))
    assert images.shape == (5, 4, 3, 1) and labels.dtype == np.int32


def test_missing_files_errors(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(ValueError, match="dir .*nope does not exist"):
        MNIST(missing, download=False)
    with pytest.raises(ValueError, match="root does not contain valid raw files, please set download=True"):
        MNIST(str(tmp_path), download=False)
    with pytest.raises(ValueError, match="dir does not contain target file .*cifar-10-batches-py"):
        CIFAR10(str(tmp_path), download=False)
    with pytest.raises(RuntimeError, match="downloading is not supported by megtrace"):
        MNIST(str(tmp_path / "new"), download=True)
    with pytest.raises(FileNotFoundError):
        ImageFolder(missing)


class _Evil:
    def __reduce__(self):
        return (os.system, ("true",))


def test_cifar_pickle_cannot_run_code(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in CIFAR10.train_batch:
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"labels": [_Evil()]}, f)
    with pytest.raises(UnsafePickleError):
        CIFAR10(str(tmp_path), download=False)


def test_imagenet_reads_extracted_folders(fixtures, tmp_path):
    from megtrace.data.dataset import ImageNet
    root, ours = fixtures
    os.symlink(os.path.join(root, "folder"), tmp_path / "val")
    ds = ImageNet(str(tmp_path), train=False)
    assert len(ds) == int(ours["folder/len"])
    for i in range(len(ds)):
        np.testing.assert_array_equal(ds[i][0], ours["folder/%d/0" % i])
        assert ds[i][1] == ours["folder/%d/1" % i]
    with pytest.raises(FileNotFoundError, match="expected image folder .*train does not exist, and raw files"):
        ImageNet(str(tmp_path), train=True)
    with pytest.raises(FileNotFoundError, match="dir .*absent does not exist"):
        ImageNet(str(tmp_path / "absent"))
