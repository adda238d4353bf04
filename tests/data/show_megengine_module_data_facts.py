"""Module and data facts (tests/test_modules_extra.py asserts the last two; megtrace's
Identity returns its input itself, see the README), shown by MegEngine 1.13 itself
(run with /work/shared/megref/mpy; prints, writes nothing). Output on 1.13.0, CPU:

  identity: is x False x after y[0] = 5: [0.0, 0.0, 0.0]
  from_pretrained: [[4.0, 5.0], [0.0, 1.0]] freeze True
  string field of a batch: tuple ('x0', 'x1')
"""
import numpy as np
import megengine as mge
import megengine.module as M
from megengine.data import DataLoader, SequentialSampler
from megengine.data.dataset import Dataset

x = mge.Tensor(np.zeros(3, "float32"))
y = M.Identity()(x)
same = y is x
y[0] = 5.0
print("identity: is x", same, "x after y[0] = 5:", x.numpy().tolist())
emb = M.Embedding.from_pretrained(mge.Tensor(np.arange(6, dtype="float32").reshape(3, 2)))
print("from_pretrained:", emb(mge.Tensor(np.array([2, 0], "int32"))).numpy().tolist(),
      "freeze", emb.freeze)


class Named(Dataset):
    def __init__(self):
        pass

    def __getitem__(self, i):
        return i, float(i), "x%d" % i

    def __len__(self):
        return 4


batch = next(iter(DataLoader(Named(), SequentialSampler(Named(), batch_size=2))))
print("string field of a batch:", type(batch[2]).__name__, batch[2])
