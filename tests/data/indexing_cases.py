"""Indexing/setitem functions shared by make_megengine_indexing.py (run in MegEngine) and
the tests (run in megtrace): plain Python on a tensor API both libraries have."""
import numpy as np

_x3 = np.arange(60, dtype=np.float32).reshape(4, 5, 3)
_x2 = np.arange(20, dtype=np.float32).reshape(4, 5)
_i = np.array([0, 2], np.int32)
_j = np.array([1, -1], np.int32)


def set_sub(x, v):
    x[1:3, 2] = v
    return x


def set_sub_step(x, v):
    x[::-2, 1] = v
    return x


def set_vec(x, v, i):
    x[i] = v
    return x


def set_vec_apart(x, v, i, j):
    x[i, :, j] = v
    return x


def set_vec_slice(x, v, i):
    x[1:, i] = v
    return x


def get_vec_apart(x, i, j):
    return x[i, 1:3, j]


def get_int_vec(x, i):
    return x[1, :, i]


def get_2d_index(x, z):
    return x[z]


def get_none(x, i):
    return x[i, None, 1:2]


CASES = {
    "set_sub": (set_sub, [_x3, np.full((2, 3), -1, np.float32)]),
    "set_sub_step": (set_sub_step, [_x2, np.array([-1, -2], np.float32)]),
    "set_vec": (set_vec, [_x2, np.full((2, 5), -1, np.float32), _i]),
    "set_vec_apart": (set_vec_apart, [_x3, np.full((2, 5), -1, np.float32), _i, _j]),
    "set_vec_slice": (set_vec_slice, [_x3, np.full((3, 2, 3), -1, np.float32), _j]),
    "get_vec_apart": (get_vec_apart, [_x3, _i, _j]),
    "get_int_vec": (get_int_vec, [_x3, _i]),
    "get_2d_index": (get_2d_index, [_x3, np.array([[0, 1], [3, 2]], np.int32)]),
    "get_none": (get_none, [_x3, _i]),
}
