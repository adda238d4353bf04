"""Golden data: MegEngine 1.13's dumps of multi-head attention with masks (written as its
MultiHeadAttn opr with a fifth input, the merged additive mask), returning attention
weights, and without projections, run on its CPU proxy kernel (run in the megref chroot:
MEGREF_BIND=<repo> /work/shared/megref/mpy tests/data/make_megengine_mha_masks.py).

Writes megengine_mha_masks/<name>.mge (and <name>_fbs.mge, the FBS v1 format, for
FBS_V1) and megengine_mha_masks/io.npz: per model the packed weights `<name>.w`, the
inputs `<name>.<input>`, MegEngine's eager output `<name>.y` and, where the model returns
them, the attention weights `<name>.weights`; the script checks that MegEngine's Lite
runs its own dumps to the same values. A module is left in training mode (dropout rates
0). Two models call the MultiHeadAttn builtin directly for params its Python API does
not set: `reslink` (the CPU kernel ignores it) and a mask input under attn_mask_type
NO_MASK (the kernel ignores the mask). MegEngine's CPU kernel refuses bias_k/bias_v and
add_zero_attn (its attention-weight layout check) and is_causal without attn_mask (an
absent mask is added); the script records what it says in refusals.json.
tests/modelfile/test_mha_masks.py reads the files with megtrace and compares."""
import json
import os

import numpy as np

import megengine as mge
import megengine.functional as F
import megengine.module as M
from megengine.core._imperative_rt.core2 import apply
from megengine.core.ops import builtin
from megengine.jit import trace
from megengine.random.rng import _get_global_rng_seed

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "megengine_mha_masks")
N, L, S = 2, 3, 5
TRAINING = ("training_mode",)  # left in training mode (its dropout rates are 0)
FBS_V1 = ("weights",)        # also dumped as dump_format="FBS": <name>_fbs.mge


def causal(length, source):
    return np.triu(np.full((length, source), -np.inf, "float32"), 1)


def padding(bool_mask=False):
    m = np.zeros((N, S), bool)
    m[0, -2:] = True
    m[1, -1] = True
    return m if bool_mask else np.where(m, -np.inf, 0).astype("float32")


def builtin_op(embed, heads, **kw):
    p = dict(num_heads=heads, sm_scaler=(embed // heads) ** -0.5, attn_prob=0.0,
             out_prob=0.0, reslink=False, training=False, input_order=0,
             seed=_get_global_rng_seed(), attn_mask_type="no_mask", add_zero_attn=False,
             embeding_size=embed, k_size=embed, v_size=embed, qproj_size=embed,
             kproj_size=embed, vproj_size=embed, oproj_size=embed, qbias=True, kbias=True,
             vbias=True, obias=True, need_weights=False, tensor_combination_type="none")
    p.update(kw)
    return builtin.MultiHeadAttn(**p)


# name: (embed, heads, bias, self-attention, inputs beyond q/k/v {name: array}, call)
# call(m, q, k, v, **extra) -> output tensor
def _module_call(const=None, **kw):
    """M.MultiHeadAttention's forward; `const` masks are captured (Lite takes no bool
    inputs), the others are graph inputs. With need_weights: (output, weights)."""
    def call(m, q, k, v, **extra):
        masks = {n: mge.tensor(a) for n, a in (const or {}).items()}
        out = m(q, k, v, **extra, **masks, **kw)
        return out if kw.get("need_weights") else out[0]
    return call


def _builtin_call(**kw):
    def call(m, q, k, v, **extra):
        op = builtin_op(m.embed_dim, m.num_heads, **kw)
        return apply(op, q, k, v, m.io_weight_bias, *extra.values())[0]
    return call


def configs():
    r = np.random.RandomState(5)
    f32 = lambda *s: r.randn(*s).astype("float32")   # noqa: E731
    return {
        "attn_mask_2d": (8, 2, True, False, {"attn_mask": causal(L, S)}, _module_call()),
        "attn_mask_3d": (6, 3, False, False, {"attn_mask": f32(N * 3, L, S)},
                         _module_call()),
        "causal_given": (8, 4, True, True, {"attn_mask": causal(L, L)},
                         _module_call(is_causal=True)),
        "key_padding": (8, 2, True, False, {"key_padding_mask": padding()},
                        _module_call()),
        "key_padding_bool": (8, 2, False, False, {},
                             _module_call(const={"key_padding_mask": padding(True)})),
        "both_2d": (8, 2, True, False, {"attn_mask": f32(L, S),
                                        "key_padding_mask": padding()}, _module_call()),
        "both_3d": (6, 2, True, False, {"attn_mask": f32(N * 2, L, S),
                                        "key_padding_mask": padding()}, _module_call()),
        "weights": (8, 2, True, False, {"attn_mask": causal(L, S)},
                    _module_call(need_weights=True)),
        "weights_averaged": (6, 3, False, True, {},
                             _module_call(need_weights=True, average_attn_weights=True)),
        "training_mode": (8, 2, True, True, {"attn_mask": causal(L, L)}, _module_call()),
        "reslink": (8, 2, True, True, {}, _builtin_call(reslink=True)),
        "mask_type_none": (8, 2, True, False, {"attn_mask": causal(L, S)},
                           _builtin_call(tensor_combination_type="only_mask")),
    }


# F.nn.multi_head_attention with projection sizes of 0 (no projection: the whole input for
# every head; no output projection: the merged heads):
# name: (embed, heads, kdim, vdim, {q,k,v,o}proj_size, {q,k,v,o}bias, with a 2-d mask)
PROJ0 = {
    "proj0_qk": (4, 2, 4, 3, (0, 0, 6, 5), (False, False, True, True), False),
    "proj0_o": (8, 2, 8, 8, (8, 8, 8, 0), (True, True, True, False), True),
    "proj0_v": (4, 2, 4, 3, (4, 4, 0, 5), (True, False, False, True), True),
    "proj0_vo": (6, 3, 6, 2, (6, 6, 0, 0), (False, False, False, False), False),
}


def packed_len(embed, heads, kdim, vdim, sizes, biases):
    qs, ks, vs, os_ = sizes
    n = embed * qs + kdim * ks + vdim * vs + (vs or heads * vdim) * os_
    return n + sum(s for s, b in zip(sizes, biases) if b)


def proj0_models(io):
    for name, (embed, heads, kdim, vdim, sizes, biases, masked) in PROJ0.items():
        w = np.random.uniform(-0.5, 0.5, (1, packed_len(embed, heads, kdim, vdim, sizes,
                                                        biases))).astype("float32")
        arrays = {"q": np.random.randn(N, L, embed).astype("float32"),
                  "k": np.random.randn(N, S, kdim).astype("float32"),
                  "v": np.random.randn(N, S, vdim).astype("float32")}
        if masked:
            arrays["attn_mask"] = causal(L, S)
        names = list(arrays)
        kw = dict(zip(("qproj_size", "kproj_size", "vproj_size", "oproj_size"), sizes),
                  **dict(zip(("qbias", "kbias", "vbias", "obias"), biases)))

        def fn(q, k, v, *mask):
            return F.nn.multi_head_attention(q, k, v, embed, heads, 0.0, 0.0,
                                             mge.tensor(w), training=False,
                                             attn_mask=mask[0] if mask else None, **kw)[0]
        y = fn(*[mge.tensor(arrays[n]) for n in names]).numpy()
        f = trace(fn, symbolic=True, capture_as_const=True)
        f(*[mge.tensor(arrays[n]) for n in names])
        path = os.path.join(HERE, f"{name}.mge")
        f.dump(path, arg_names=names, output_names=["y"])
        (lite,) = lite_run(path, arrays, ["y"])
        err = float(np.abs(lite - y).max())
        assert err <= 1e-5, (name, err)
        io.update({f"{name}.{n}": a for n, a in arrays.items()})
        io[f"{name}.w"], io[f"{name}.y"] = w, y
        print(name, y.shape, "lite |err|", err)


def lite_run(path, inputs, outputs):
    from megenginelite import LiteNetwork
    net = LiteNetwork()
    net.load(path)
    for name, a in inputs.items():
        t = net.get_io_tensor(name)
        t.set_data_by_copy(np.ascontiguousarray(a))
    net.forward()
    net.wait()
    return [net.get_io_tensor(n).to_numpy() for n in outputs]


def refusals():
    """What MegEngine's CPU kernel says to the features it does not run."""
    r = np.random.RandomState(7)
    q = mge.tensor(r.randn(N, L, 8).astype("float32"))
    w = mge.tensor(r.randn(1, 4 * 64 + 32).astype("float32"))
    bk = mge.tensor(r.randn(1, 1, 8).astype("float32"))
    out = {}
    cases = {"add_zero_attn": (dict(add_zero_attn=True), []),
             "bias_kv": (dict(tensor_combination_type="only_biaskv"), [bk, bk]),
             "default_mask_without_mask": (dict(attn_mask_type="default_mask"), [])}
    for name, (kw, extra) in cases.items():
        op = builtin_op(8, 2, **kw)
        f = trace(lambda q: apply(op, q, q, q, w, *extra)[0], symbolic=True,
                  capture_as_const=True)
        try:
            f(q).numpy()
            out[name] = None
        except Exception as e:      # the first line: MegEngine's assertion and message
            text = str(e)
            extra_msg = [ln for ln in text.splitlines() if ln.startswith("extra message")]
            out[name] = (extra_msg or text.splitlines())[0].split(" details:")[0]
    return out


def main():
    os.makedirs(HERE, exist_ok=True)
    mge.config.async_level = 0
    np.random.seed(23)
    mge.random.seed(23)         # the dropout seed in the params: the same files each run
    io = {}
    for name, (embed, heads, bias, self_attn, extra, call) in configs().items():
        m = M.MultiHeadAttention(embed, heads, bias=bias)
        if name not in TRAINING:
            m.eval()
        w = np.random.uniform(-0.5, 0.5, m.io_weight_bias.shape).astype("float32")
        m.io_weight_bias._reset(mge.tensor(w))
        q = np.random.randn(N, L, embed).astype("float32")
        k = q if self_attn else np.random.randn(N, S, embed).astype("float32")
        v = q if self_attn else np.random.randn(N, S, embed).astype("float32")
        arrays = {"q": q, "k": k, "v": v, **extra}
        names = ["q"] + ([] if self_attn else ["k", "v"]) + list(extra)

        def fn(*ts):
            t = dict(zip(names, ts))
            x = t["q"]
            return call(m, x, t.get("k", x), t.get("v", x),
                        **{n: t[n] for n in extra})
        ys = fn(*[mge.tensor(arrays[n]) for n in names])
        ys = [t.numpy() for t in (ys if isinstance(ys, tuple) else (ys,))]
        outs = ["y", "weights"][:len(ys)]
        f = trace(fn, symbolic=True, capture_as_const=True)
        f(*[mge.tensor(arrays[n]) for n in names])
        path = os.path.join(HERE, f"{name}.mge")
        f.dump(path, arg_names=names, output_names=outs)
        paths = [path]
        if name in FBS_V1:          # the older format too (its ids count every output)
            paths.append(os.path.join(HERE, f"{name}_fbs.mge"))
            f.dump(paths[-1], arg_names=names, output_names=outs, dump_format="FBS")
        for p in paths:
            lite = lite_run(p, {n: arrays[n] for n in names}, outs)
            err = max(float(np.abs(a - y).max()) for a, y in zip(lite, ys))
            assert err <= 1e-5, (p, err)
        io[f"{name}.w"] = w
        io.update({f"{name}.{n}": arrays[n] for n in names})
        io.update({f"{name}.{n}": y for n, y in zip(outs, ys)})
        print(name, "lite |err|", err)
    proj0_models(io)
    np.savez_compressed(os.path.join(HERE, "io.npz"), **io)
    with open(os.path.join(HERE, "refusals.json"), "w") as fh:
        json.dump(refusals(), fh, indent=1, sort_keys=True)
        fh.write("\n")
    print("wrote", len(io), "arrays")


if __name__ == "__main__":
    main()
