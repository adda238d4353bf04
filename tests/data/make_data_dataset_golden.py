"""Golden samples of MegEngine 1.13's MNIST, CIFAR10, CIFAR100 and ImageFolder read from small local
fixture files (run with the real MegEngine: /work/shared/megref/mpy tests/data/make_data_dataset_golden.py).
Writes tests/data/data_dataset_golden.npz; the test writes the same fixtures and reads them with megtrace."""
import gzip
import os
import pickle
import struct
import tempfile

import cv2
import numpy as np


def write_fixtures(root: str) -> None:
    """Deterministic tiny MNIST idx files, CIFAR-10/100 batch pickles and an ImageFolder tree."""
    rng = np.random.RandomState(0)
    mnist = os.path.join(root, "mnist")
    os.makedirs(mnist, exist_ok=True)
    for prefix, count in (("train", 5), ("t10k", 3)):
        pixels = rng.randint(0, 256, size=(count, 4, 3)).astype(np.uint8)
        with gzip.open(os.path.join(mnist, prefix + "-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">iiii", 2051, count, 4, 3) + pixels.tobytes())
        with gzip.open(os.path.join(mnist, prefix + "-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">ii", 2049, count) + rng.randint(0, 10, count).astype(np.uint8).tobytes())
    for name, folder, batches, keys in (
            ("cifar10", "cifar-10-batches-py", ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"],
             [b"labels"]),
            ("cifar100", "cifar-100-python", ["train", "test"], [b"fine_labels", b"coarse_labels"])):
        path = os.path.join(root, name, folder)
        os.makedirs(path, exist_ok=True)
        for batch in batches:
            record = {b"data": rng.randint(0, 256, size=(2, 3072)).astype(np.uint8)}
            for key in keys:
                record[key] = [int(v) for v in rng.randint(0, 100, 2)]
            with open(os.path.join(path, batch), "wb") as f:
                pickle.dump(record, f, protocol=2)
    for cls, names in (("cat", ["b.png", "a.png", "notes.txt"]), ("ant", ["z.png"]), ("dog/sub", ["c.bmp"])):
        path = os.path.join(root, "folder", cls)
        os.makedirs(path, exist_ok=True)
        for name in names:
            if name.endswith(".txt"):
                open(os.path.join(path, name), "w").close()
            else:
                cv2.imwrite(os.path.join(path, name), rng.randint(0, 256, size=(3, 5, 3)).astype(np.uint8))


def read_all(module: str, root: str) -> dict:
    """Every sample of every fixture dataset, flattened to name -> array."""
    ds = __import__(module + ".data.dataset", fromlist=["*"])
    made = {
        "mnist_train": ds.MNIST(os.path.join(root, "mnist"), train=True, download=False),
        "mnist_test": ds.MNIST(os.path.join(root, "mnist"), train=False, download=False),
        "cifar10_train": ds.CIFAR10(os.path.join(root, "cifar10"), train=True, download=False),
        "cifar10_test": ds.CIFAR10(os.path.join(root, "cifar10"), train=False, download=False),
        "cifar100_train": ds.CIFAR100(os.path.join(root, "cifar100"), train=True, download=False),
        "folder": ds.ImageFolder(os.path.join(root, "folder")),
    }
    out = {}
    for name, dataset in made.items():
        out[name + "/len"] = np.array(len(dataset))
        for i in range(len(dataset)):
            for j, field in enumerate(dataset[i]):
                out["%s/%d/%d" % (name, i, j)] = np.asarray(field)
    return out


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        write_fixtures(tmp)
        golden = read_all("megengine", tmp)
    np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_dataset_golden.npz"),
                        **golden)
