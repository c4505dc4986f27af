"""Broken traces: each gives one line on stderr naming the rank file and node, never a traceback."""

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from simtrain.traceio.chakra_export import _encode
from tests.trace.helpers import cli

pytestmark = pytest.mark.needs_extra("chakra")
pb = pytest.importorskip(
    "chakra.schema.protobuf.et_def_pb2", reason="needs the optional extra simtrain[chakra]"
)


def replay(capsys, directory: Path, *extra: str):
    """``simtrain replay DIRECTORY`` on an H100 SuperPOD: (exit code, stdout, stderr)."""
    return cli(
        capsys,
        "replay",
        str(directory),
        "--topology",
        "dgx-h100-superpod",
        "--accelerator",
        "H100-SXM",
        *extra,
    )


def node(node_id, type_=pb.COMP_NODE, deps=(), **attrs):
    n = pb.Node(id=node_id, name=f"n{node_id}", type=type_, ctrl_deps=list(deps))
    n.duration_micros = 10
    for key, value in attrs.items():
        if isinstance(value, str):
            n.attr.append(pb.AttributeProto(name=key, string_val=value))
        elif isinstance(value, list):
            n.attr.append(pb.AttributeProto(name=key, int64_list=pb.Int64List(values=value)))
        else:
            n.attr.append(pb.AttributeProto(name=key, int64_val=value))
    return n


def et_bytes(nodes, **meta):
    header = pb.GlobalMetadata(version="0.0.4")
    for key, value in meta.items():
        header.attr.append(pb.AttributeProto(name=key, int64_val=value))
    return _encode(header) + b"".join(_encode(n) for n in nodes)


def write(directory: Path, files: dict[str, bytes | str]) -> Path:
    directory.mkdir()
    for name, data in files.items():
        path = directory / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return directory


def coll(node_id, **attrs):
    return node(node_id, pb.COMM_COLL_NODE, comm_type=0, comm_size=1024, **attrs)


GOOD = [node(0), node(1, deps=[0])]

# name -> (files of the trace directory, a fragment the error must contain)
CASES: dict[str, tuple[Callable[[], dict[str, bytes | str]], str]] = {
    "truncated_message": (
        lambda: {"t.0.et": et_bytes(GOOD)[:-3]},
        "file is truncated (13 bytes announced, 10 left) (after node 0)",
    ),
    "truncated_length_prefix": (
        lambda: {"t.0.et": et_bytes(GOOD) + b"\x80"},
        "truncated inside a length prefix (after node 1)",
    ),
    "garbage_bytes": (
        lambda: {"t.0.et": b"\x05\xff\xff\xff\xff\xff"},
        "t.0.et: message at byte 0 is not a Chakra GlobalMetadata",
    ),
    "corrupt_gzip": (lambda: {"t.0.et": gzip.compress(et_bytes(GOOD))[:20]}, "corrupt gzip"),
    "dependency_cycle": (
        lambda: {"t.0.et": et_bytes([node(0, deps=[1]), node(1, deps=[0])])},
        "node 0 (n0): dependency cycle",
    ),
    "stream_order_cycle": (
        lambda: {"t.0.et": et_bytes([node(0, deps=[1]), node(1)])},
        "dependency cycle",
    ),
    "self_dependency": (lambda: {"t.0.et": et_bytes([node(0, deps=[0])])}, "depends on itself"),
    "dangling_dependency": (
        lambda: {"t.0.et": et_bytes([node(0), node(1, deps=[7])])},
        "node 1 (n1): dependency 7 is not a node",
    ),
    "duplicate_node_id": (lambda: {"t.0.et": et_bytes([node(3), node(3)])}, "node 3 (n3)"),
    "unknown_node_type": (lambda: {"t.0.et": et_bytes([node(5, type_=42)])}, "unknown node type"),
    "invalid_node_type": (lambda: {"t.0.et": et_bytes([node(5, type_=0)])}, "node 5"),
    "comm_type_out_of_range": (
        lambda: {"t.0.et": et_bytes([node(2, pb.COMM_COLL_NODE, comm_type=99)])},
        "'comm_type' must be 0-9",
    ),
    "comm_type_missing": (
        lambda: {"t.0.et": et_bytes([node(2, pb.COMM_COLL_NODE)])},
        "node 2 (n2): attribute 'comm_type' is missing",
    ),
    "comm_size_wrong_type": (
        lambda: {"t.0.et": et_bytes([node(2, pb.COMM_COLL_NODE, comm_type=0, comm_size="big")])},
        "'comm_size' must be an integer",
    ),
    "comm_size_negative": (
        lambda: {"t.0.et": et_bytes([node(2, pb.COMM_COLL_NODE, comm_type=0, comm_size=-5)])},
        "'comm_size' must be >= 0",
    ),
    "send_without_destination": (
        lambda: {"t.0.et": et_bytes([node(4, pb.COMM_SEND_NODE, comm_src=0)])},
        "node 4 (n4): attribute 'comm_dst' is missing",
    ),
    "send_of_another_rank": (
        lambda: {"t.0.et": et_bytes([node(4, pb.COMM_SEND_NODE, comm_src=2, comm_dst=3)])},
        "must have it as comm_src or comm_dst",
    ),
    "send_to_huge_rank": (
        lambda: {"t.0.et": et_bytes([node(4, pb.COMM_SEND_NODE, comm_src=0, comm_dst=1 << 40)])},
        "must be a rank",
    ),
    "send_without_recv": (
        lambda: {
            "t.0.et": et_bytes([node(4, pb.COMM_SEND_NODE, comm_src=0, comm_dst=1)]),
            "t.1.et": et_bytes([node(0)]),
        },
        "no matching node in the file of rank 1",
    ),
    "collective_on_one_rank_only": (
        lambda: {"t.0.et": et_bytes([coll(6)]), "t.1.et": et_bytes([node(0)])},
        "t.0.et: node 6",
    ),
    "collectives_in_crossed_orders": (
        lambda: {
            "t.0.et": et_bytes([coll(0, collective_key="a"), coll(1, collective_key="b")]),
            "t.1.et": et_bytes([coll(0, collective_key="b"), coll(1, collective_key="a")]),
        },
        "orders that cannot all be met",
    ),
    "group_without_own_rank": (
        lambda: {"t.0.et": et_bytes([coll(6, pg_ranks=[1, 2])])},
        "must contain rank 0",
    ),
    "bad_metadata_weight": (lambda: {"t.0.et": et_bytes(GOOD, weight=0)}, "'weight' must be"),
    "huge_world_size": (lambda: {"t.0.et": et_bytes(GOOD, world_size=1 << 50)}, "world_size"),
    "huge_rank_in_file_name": (lambda: {"t.99999999999.et": et_bytes(GOOD)}, "rank must be"),
    "two_files_one_rank": (
        lambda: {"a.0.et": et_bytes(GOOD), "b.0.et": et_bytes(GOOD)},
        "a second file for rank 0",
    ),
    "no_rank_files": (lambda: {"readme.txt": "hello"}, "no rank files"),
    "json_truncated": (lambda: {"t.0.json": '{"id": 1, "name": "a", "type": "COMP_'}, "t.0.json"),
    "json_wrong_field_type": (
        lambda: {"t.0.json": json.dumps([{"id": "abc", "type": "COMP_NODE"}])},
        "t.0.json: node 'abc'",
    ),
    "json_nested_too_deeply": (
        lambda: {"t.0.json": "[" * 200_000 + "]" * 200_000},
        "t.0.json: JSON nested too deeply",
    ),
    "json_not_an_object": (lambda: {"t.0.json": "[42]"}, "t.0.json: object 0"),
    "json_unknown_field": (
        lambda: {"t.0.json": json.dumps([{"id": 1, "colour": "red"}])},
        "t.0.json: node 1",
    ),
    "op_columns_mismatch": (
        lambda: {
            "t.0.json": json.dumps(
                [
                    {
                        "id": 1,
                        "type": "COMP_NODE",
                        "attr": [
                            {"name": "op.kind", "stringList": {"values": ["gemm"]}},
                            {"name": "op.flops", "doubleList": {"values": [1.0, 2.0]}},
                        ],
                    }
                ]
            )
        },
        "t.0.json: node 1",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_trace_gives_one_line_error(case, tmp_path, capsys):
    build, fragment = CASES[case]
    directory = write(tmp_path / case, build())
    code, _, err = replay(capsys, directory)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err


def test_node_count_limit(tmp_path, capsys):
    directory = write(tmp_path / "many", {"t.0.et": et_bytes([node(i) for i in range(11)])})
    code, _, err = replay(capsys, directory, "--max-trace-nodes", "10")
    assert code == 2 and "t.0.et: the number of nodes must be at most 10 (got 11; raise it" in err


def test_file_size_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("simtrain.traceio.limits.MAX_FILE_BYTES", 16)
    directory = write(tmp_path / "big", {"t.0.et": et_bytes(GOOD * 5)})
    code, _, err = replay(capsys, directory)
    assert code == 2 and "t.0.et: file size must be at most 16 bytes" in err


def test_a_good_trace_replays(tmp_path, capsys):
    directory = write(tmp_path / "good", {"t.0.et": et_bytes(GOOD)})
    code, out, err = cli(
        capsys,
        "replay",
        str(directory),
        "--topology",
        "dgx-h100-superpod",
        "--accelerator",
        "H100-SXM",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["step_time_s"] == pytest.approx(20e-6)
