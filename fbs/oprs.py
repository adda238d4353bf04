"""MegEngine operator identity: serialized type name -> (type_id, opr_version).

FBS_V2 looks oprs up by `type_id` and needs the exact registration version. Oprs
registered at version 2 hash their C++ token with its trailing NUL; version-1 oprs hash
the token without a trailing `V<n>` and without NUL (XXH64, seed 20160701; a hash of 0
becomes 1).
"""
from __future__ import annotations

import re
from functools import lru_cache

SEED = 20160701

# Oprs registered at version 2 (MGB_SEREG_OPR_V2); everything else is version 1.
VERSION_2 = frozenset({
    "Host2DeviceCopy", "ImmutableTensor", "MultipleDeviceTensorHolder",
    "SharedDeviceTensorWithFormat", "MultipleDeviceTensorWithFormatHolder",
    "Convolution", "ConvolutionBackwardData", "ConvolutionBackwardFilter",
    "ConvBiasForward", "BatchConvBiasForward", "Convolution3D",
    "Convolution3DBackwardData", "Convolution3DBackwardFilter", "LocalShareForward",
    "LocalShareBackwardData", "LocalShareBackwardFilter", "DeformableConvForward",
    "DeformableConvBackwardData", "DeformableConvBackwardFilter", "Softmax",
    "GroupNorm", "InstanceNorm",
})


def _xxh64(data: bytes) -> int:
    import xxhash
    value = xxhash.xxh64_intdigest(data, SEED)
    return value or 1


@lru_cache(maxsize=None)
def identity(type_name: str) -> tuple[int, int]:
    """(type_id, opr_version) for a serialized type name such as "MatrixMulV2"."""
    if type_name in VERSION_2:
        return _xxh64(type_name.encode() + b"\0"), 2
    return _xxh64(re.sub(r"V\d$", "", type_name).encode()), 1


@lru_cache(maxsize=None)
def _by_id() -> dict[tuple[int, int], str]:
    names = set(VERSION_2) | KNOWN_V1
    return {identity(n): n for n in names}


def name_of(type_id: int, version: int) -> str | None:
    return _by_id().get((type_id, version))


# Version-1 type names the reader knows (serialized spelling, as MegEngine writes them).
KNOWN_V1 = frozenset({
    "SharedDeviceTensor", "Elemwise", "TypeCvtV2", "PowC", "ReduceV2", "MatrixMulV2",
    "BatchedMatrixMulV2", "PoolingV1", "AdaptivePoolingV1", "LayerNorm", "GeneralNorm",
    "BatchNormV1", "Dimshuffle", "AxisAddRemove", "ReshapeV1", "Broadcast", "Concat",
    "Split", "GetVarShapeV1", "Subtensor", "IndexingMultiAxisVec", "IndexingOneHot",
    "Argmax", "Argmin", "TopK", "CumsumV1", "Linspace", "Padding", "ResizeV2",
    "WarpPerspectiveV2", "ElemwiseMultiType", "AssertEqual", "Identity", "Copy",
    "GroupLocal", "RelayoutFormatV1",
    "RemapV1", "WarpAffineV2", "CvtColor", "ROIAlignV1", "ROIPooling", "NMSKeepMGB",
    "Images2Neibs", "SlidingWindowTranspose", "DeformablePSROIPoolingForward",
    "SetSubtensor", "IncrSubtensor", "IndexingSetMultiAxisVec", "IndexingIncrMultiAxisVec",
})
# sorting, linear algebra and indexing oprs of MegEngine's math/tensor functionals
KNOWN_V1 |= {"SVD", "Argsort", "Dot", "MatrixInverse", "Diag", "IndexingSetMultiAxisVec", "CondTake",
             "Eye", "IndexingSetOneHot"}
# region restricted convolution (MGB_SEREG_OPR: version 1, Convolution param only)
KNOWN_V1 |= {"RegionRestrictedConvolution"}
# random number oprs (megtrace.random)
KNOWN_V1 |= {"UniformRNGV1", "GaussianRNGV1", "GammaRNG", "PoissonRNG", "BetaRNG"}


# FBS (V1) files key oprs by MGB_HASH_STR of the C++ token: the serialized name with its
# trailing NUL, where a few tokens keep a version suffix the FBS_V2 name dropped.
V1_TOKENS = {"Convolution": "ConvolutionV2", "ConvBiasForward": "ConvBiasForwardV4",
             "ConvolutionBackwardData": "ConvolutionBackwardDataV2",
             "BatchConvBiasForward": "BatchConvBiasForwardV1"}


@lru_cache(maxsize=None)
def v1_type_id(type_name: str) -> int:
    return _xxh64(V1_TOKENS.get(type_name, type_name).encode() + b"\0")


@lru_cache(maxsize=None)
def unversioned_type_id(type_name: str) -> int:
    """The id MegEngine 8.14 ("MGBS" files) uses: token without `V<n>` and without NUL."""
    return _xxh64(re.sub(r"V\d$", "", V1_TOKENS.get(type_name, type_name)).encode())


@lru_cache(maxsize=None)
def _by_v1_id() -> dict[int, str]:
    names = set(VERSION_2) | KNOWN_V1
    table = {v1_type_id(n): n for n in names}
    table.update({unversioned_type_id(n): n for n in names})
    return table


def name_of_v1(type_id: int) -> str | None:
    return _by_v1_id().get(type_id)


# local response normalization (F.nn.local_response_norm)
KNOWN_V1 |= {"LRN"}
# recurrent layers (MGB_SEREG_OPR(RNNForward, 3), (LSTMForward, 4)) and the random oprs of
# F.random.permutation/shuffle and F.nn.dropout
KNOWN_V1 |= {"RNNForward", "LSTMForward", "PermutationRNG", "ShuffleRNG", "Dropout",
             "MultiHeadAttn"}
# fake quantization oprs of QAT dumps (MGB_SEREG_OPR(FakeQuant, 3), (TQT, 2), (LSQ, 4))
KNOWN_V1 |= {"FakeQuant", "TQT", "LSQ"}
