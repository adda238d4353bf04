"""float64 reference convolution the CPU rules' tests compare kernels with."""
import numpy as np


def conv_ref(x, w, stride=(1, 1), padding=(0, 0)):
    """NCHW conv; w (OC, IC, KH, KW) or depthwise (C, 1, 1, KH, KW)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    (sh, sw), (ph, pw) = stride, padding
    kh, kw = w.shape[-2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = (xp.shape[2] - kh) // sh + 1, (xp.shape[3] - kw) // sw + 1
    out = 0
    for a in range(kh):
        for b in range(kw):
            patch = xp[:, :, a:a + sh * (oh - 1) + 1:sh, b:b + sw * (ow - 1) + 1:sw]
            if w.ndim == 5:
                out = out + patch * w[:, 0, 0, a, b][None, :, None, None]
            else:
                out = out + np.einsum("nchw,oc->nohw", patch, w[:, :, a, b])
    return out
