"""The schema, the generated code and MegEngine's operator ids agree."""
from megtrace.fbs.oprs import identity
from megtrace.fbs.regen import OUT_DIR, schema_digest
from megtrace.fbs.schema_info import schema
from megtrace.fbs.tables import union_members


def test_generated_code_matches_schema():
    recorded = (OUT_DIR / "SCHEMA_SHA256").read_text().strip()
    assert recorded == schema_digest(), "schema edited without `python -m megtrace.fbs.regen`"


def test_type_ids_match_megengine_dumps():
    # (type_id, opr_version) read from files written by MegEngine 1.13
    assert identity("Host2DeviceCopy") == (2436615116837392937, 2)
    assert identity("ImmutableTensor") == (6977527550664090289, 2)
    assert identity("Convolution") == (13553933750987029374, 2)
    assert identity("Elemwise") == (15475644582354676744, 1)
    assert identity("MatrixMulV2") == (3532845811984360002, 1)
    assert identity("BatchNormV1") == (6032777997293313103, 1)
    assert identity("ReshapeV1") == (13416951895346073752, 1)
    assert identity("GetVarShapeV1") == (1191858899092043317, 1)
    assert identity("Subtensor") == (5965999436643207205, 1)
    assert identity("Concat") == (9254494158825588843, 1)
    assert identity("PoolingV1") == (5154136392692894827, 1)
    assert identity("Softmax") == (17433518091429734055, 2)


def test_union_indices_and_param_defaults():
    members = union_members()
    assert members[3] == "Convolution" and members[17] == "Elemwise"
    assert members[55] == "ExecutionPolicy" and members[63] == "Host2DeviceCopy"
    assert members[67] == "DType" and members[97] == "Cross"
    assert len(members) == 98 and members[0] == "NONE"
    s = schema()
    assert [f.name for f in s.tables["ConvBias"]][:4] == ["nonlineMode", "mode", "sparse",
                                                          "format"]
    assert s.enums["ElemwiseMode"]["FUSE_ADD_RELU"] == 37
