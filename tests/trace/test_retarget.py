"""--retarget: measured compute re-estimated where shapes are known, scaled otherwise."""

import pytest

from simtrain.catalog import get_accelerator
from simtrain.compute.roofline import RooflineComputeModel
from simtrain.traceio.chakra_export import _encode
from simtrain.workload.ops import Op
from tests.trace.helpers import report

TOPOLOGY = ["--topology", "dgx-h100-superpod", "--accelerator", "H100-SXM"]
GEMM = Op("mlp_fc1", "gemm", flops=2.0 * 4096 * 4096 * 8192, m=8192, n=4096, k=4096)

pytestmark = pytest.mark.needs_extra("chakra")
pb = pytest.importorskip(
    "chakra.schema.protobuf.et_def_pb2", reason="needs the optional extra simtrain[chakra]"
)


def comp(node_id: int, micros: int, op: Op | None = None) -> pb.Node:
    node = pb.Node(id=node_id, name=f"k{node_id}", type=pb.COMP_NODE, duration_micros=micros)
    if node_id:
        node.ctrl_deps.append(node_id - 1)
    if op is not None:
        node.attr.extend(
            [
                pb.AttributeProto(name="op.name", string_list=pb.StringList(values=[op.name])),
                pb.AttributeProto(name="op.kind", string_list=pb.StringList(values=[op.kind])),
                pb.AttributeProto(name="op.phase", string_list=pb.StringList(values=[op.phase])),
                pb.AttributeProto(name="op.comm", string_list=pb.StringList(values=[""])),
                pb.AttributeProto(name="op.axis", string_list=pb.StringList(values=[""])),
                pb.AttributeProto(name="op.causal", bool_list=pb.BoolList(values=[False])),
            ]
        )
        for name in ("flops", "bytes_accessed", "comm_bytes"):
            value = float(getattr(op, name))
            node.attr.append(
                pb.AttributeProto(name=f"op.{name}", double_list=pb.DoubleList(values=[value]))
            )
        for name in ("m", "n", "k", "batch", "overlap_ops", "layer"):
            value = int(getattr(op, name))
            node.attr.append(
                pb.AttributeProto(name=f"op.{name}", int64_list=pb.Int64List(values=[value]))
            )
    return node


@pytest.fixture
def measured_dir(tmp_path):
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.append(pb.AttributeProto(name="accelerator", string_val="A100-80GB"))
    nodes = [comp(0, 2000, GEMM), comp(1, 500)]  # a shaped GEMM, then an opaque kernel
    (tmp_path / "m.0.et").write_bytes(_encode(meta) + b"".join(_encode(n) for n in nodes))
    return tmp_path


def test_measured_durations_are_kept_without_retarget(measured_dir, capsys):
    result = report(capsys, "replay", str(measured_dir), *TOPOLOGY)
    assert result["step_time_s"] == pytest.approx(2500e-6)
    assert result["replay"]["source_accelerator"] == "A100-80GB"


def test_retarget_reestimates_shaped_ops_and_scales_the_rest(measured_dir, capsys):
    result = report(capsys, "replay", str(measured_dir), *TOPOLOGY, "--retarget")
    note = result["replay"]["retarget"]
    assert (note["num_reestimated"], note["num_scaled"]) == (1, 1)
    assert note["scaled_names"] == ["k1"]
    h100 = get_accelerator("H100-SXM")
    gemm_s = RooflineComputeModel(h100, "bf16").task_time_s([GEMM])
    scale = get_accelerator("A100-80GB").peak_flops["bf16"] / h100.peak_flops["bf16"]
    assert note["scale"] == pytest.approx(scale)
    assert result["step_time_s"] == pytest.approx(gemm_s + 500e-6 * scale)
    assert result["model_flops_per_step"] == pytest.approx(GEMM.flops)


def converter_node(node_id: int, name: str, shapes: str, types: str, micros: int) -> pb.Node:
    """A COMP_NODE as mlc-chakra's PyTorch converter writes it (inputs as Python literals)."""
    node = pb.Node(id=node_id, name=name, type=pb.COMP_NODE, duration_micros=micros)
    node.inputs.shapes, node.inputs.types = shapes, types
    return node


def test_pytorch_converter_matmul_shapes_are_reestimated(tmp_path, capsys):
    bf16 = "['Tensor(c10::BFloat16)', 'Tensor(c10::BFloat16)', 'Tensor(c10::BFloat16)']"
    nodes = [
        converter_node(0, "aten::addmm", "[[4096], [8192, 4096], [4096, 4096]]", bf16, 900),
        converter_node(1, "aten::gelu", "[[8192, 4096]]", "['Tensor(c10::BFloat16)']", 100),
        converter_node(2, "aten::bmm", "[[8, 64, 32], [8, 32, 16]]", bf16, 7),
        converter_node(3, "aten::mm", "[[3, 4], [5, 6]]", bf16, 5),  # inner dims differ
    ]
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.append(pb.AttributeProto(name="accelerator", string_val="A100-80GB"))
    (tmp_path / "pt.0.et").write_bytes(_encode(meta) + b"".join(_encode(n) for n in nodes))
    kept = report(capsys, "replay", str(tmp_path), *TOPOLOGY)
    assert kept["step_time_s"] == pytest.approx(1012e-6)
    assert kept["model_flops_per_step"] == pytest.approx(
        2.0 * 8192 * 4096 * 4096 + 2.0 * 8 * 64 * 16 * 32
    )
    note = report(capsys, "replay", str(tmp_path), *TOPOLOGY, "--retarget")["replay"]["retarget"]
    assert (note["num_reestimated"], note["num_scaled"]) == (2, 2)
    assert note["scaled_names"] == ["aten::gelu", "aten::mm"]


@pytest.mark.parametrize(
    "shapes",
    ["[" * 4000 + "]" * 4000, "[[1, 'a'], [2, 3]]", "__import__('os')", "[[2, 3]]", "x" * 20000],
)
def test_unusable_shapes_fall_back_to_the_measured_time(tmp_path, capsys, shapes):
    node = converter_node(0, "aten::mm", shapes, "['Tensor(float)']", 40)
    (tmp_path / "pt.0.et").write_bytes(_encode(pb.GlobalMetadata()) + _encode(node))
    assert report(capsys, "replay", str(tmp_path), *TOPOLOGY)["step_time_s"] == pytest.approx(40e-6)


def test_retarget_of_simtrains_own_export_says_why_nothing_changes(chakra_dir, capsys):
    plain = report(capsys, "replay", str(chakra_dir), *TOPOLOGY)
    retargeted = report(capsys, "replay", str(chakra_dir), *TOPOLOGY, "--retarget")
    note = retargeted["replay"]["retarget"]
    assert note["num_reestimated"] == note["num_scaled"] == 0
    assert "no measured compute durations" in note["note"] and "H100-SXM" in note["note"]
    assert retargeted["step_time_s"] == plain["step_time_s"]  # the model timed it both times
