"""Chakra execution traces (MLCommons): read per-rank ``.et`` files and their JSON form.

A Chakra trace is one file per rank, ``<name>.<rank>.et``: a ``GlobalMetadata`` message then
``Node`` messages, each prefixed by its length as a varint (the encoding of mlc-chakra's
``protolib``). ``chakra_jsonizer`` writes the same messages as concatenated JSON objects
(``<name>.<rank>.json``); a JSON list of them is accepted too. The schema comes from the
``mlc-chakra`` package (``pip install 'simtrain[chakra]'``), imported only here.

Node types map to :class:`~simtrain.traceio.model.TraceNode` kinds: ``COMP_NODE`` and the
memory nodes are compute, ``COMM_COLL_NODE`` a collective, ``COMM_SEND_NODE`` /
``COMM_RECV_NODE`` a transfer; a ``METADATA_NODE`` takes no time. Attributes read
(Chakra's names): ``num_ops`` (FLOPs), ``tensor_size`` (bytes), ``comm_type``, ``comm_size``
(bytes), ``comm_src``, ``comm_dst``, ``comm_tag``. A collective spans the ranks listed in
``pg_ranks``, or else every rank of the trace (Chakra's ``pg_name`` and ``involved_dim``
need the job's process-group table, which the files do not carry). Traces
written by :mod:`simtrain.traceio.chakra_export` also carry ``stream``, ``category``,
``stage``, ``microbatch``, ``collective_key``, ``pg_ranks`` and one list attribute per
:class:`~simtrain.workload.ops.Op` field (``op.flops``, ``op.m``, ...), so they replay with
the same ops and the same step time. Matmul operators from the Chakra PyTorch converter get
their GEMM shape from ``inputs`` (:mod:`~simtrain.traceio.shapes`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simtrain.errors import TraceFormatError
from simtrain.traceio import limits
from simtrain.traceio.limits import (
    MAX_DEPS_PER_NODE,
    MAX_NODE_BYTES,
    MAX_NODE_FLOPS,
    MAX_NODES_PER_RANK,
    MAX_RANK,
    MAX_RANK_FILES,
    check_count,
    check_file_size,
    check_group,
    check_node,
    check_quantity,
)
from simtrain.traceio.model import NodeKind, RankTrace, TraceNode
from simtrain.traceio.shapes import gemm_op
from simtrain.workload.ops import Op

RANK_FILE = re.compile(r"^(?P<prefix>.*?)\.?(?P<rank>\d+)\.(?P<ext>et|json)$")
"""Rank file names: ``<prefix>.<rank>.et`` (or ``.json``); ``<rank>.et`` alone also works.

Examples:
    >>> RANK_FILE.match("llama.12.et")["rank"]
    '12'
"""

# Chakra CollectiveCommType -> simtrain collective kind. GATHER and SCATTER have no simtrain
# algorithm; they move the same bytes per rank as an all-gather and a broadcast of one shard.
COMM_TYPES: dict[int, str] = {
    0: "all_reduce",
    1: "reduce",
    2: "all_gather",
    3: "all_gather",
    4: "broadcast",
    5: "broadcast",
    6: "all_to_all",
    7: "reduce_scatter",
    8: "reduce_scatter",
    9: "all_reduce",
}
_KINDS: dict[int, NodeKind] = {1: "compute", 2: "compute", 3: "compute", 4: "compute"}
_KINDS |= {5: "send", 6: "recv", 7: "collective"}
OP_FIELDS = tuple(f.name for f in dataclasses.fields(Op))
# Fields added to Op after traces were first written; a trace without them gets the default.
_OPTIONAL_OP_FIELDS = frozenset(
    {"dtype", "window", "sm_target", "split_accumulator", "copy_engine", "strided"}
)


def schema() -> Any:
    """The mlc-chakra protobuf module (``et_def_pb2``).

    Raises:
        TraceFormatError: mlc-chakra is not installed.
    """
    try:
        from chakra.schema.protobuf import et_def_pb2
    except ImportError:
        raise TraceFormatError(
            "Chakra traces need mlc-chakra: pip install 'simtrain[chakra]'"
        ) from None
    return et_def_pb2


def rank_files(directory: Path) -> dict[int, Path]:
    """The rank files of a trace directory, by rank.

    Raises:
        TraceFormatError: no rank files, or two files for one rank.
    """
    found: dict[int, Path] = {}
    for path in sorted(directory.iterdir()):
        match = RANK_FILE.match(path.name)
        if not match or not path.is_file():
            continue
        rank = int(match["rank"])
        if rank > MAX_RANK:
            raise TraceFormatError(f"{path.name}: rank must be at most {MAX_RANK} (got {rank})")
        if rank in found:
            raise TraceFormatError(f"{path.name}: a second file for rank {rank}")
        found[rank] = path
    if not found:
        raise TraceFormatError(f"{directory}: no rank files named <name>.<rank>.et or .json")
    return found


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise TraceFormatError(f"{where}: file is truncated inside a length prefix")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise TraceFormatError(f"{where}: corrupt length prefix (not a Chakra .et file?)")


def _messages(data: bytes, name: str) -> Iterator[tuple[bytes, int]]:
    """Length-prefixed messages of an ``.et`` file with their byte offsets."""
    pos = count = 0
    while pos < len(data):
        where = f"{name}: message {count} at byte {pos}"
        size, body = _varint(data, pos, where)
        if body + size > len(data):
            raise TraceFormatError(
                f"{where}: file is truncated ({size} bytes announced, {len(data) - body} left)"
            )
        yield data[body : body + size], pos
        pos = body + size
        count += 1


def _gunzip(raw: bytes, name: str) -> bytes:
    """Decompress gzip data, refusing output beyond the file-size limit (a gzip bomb)."""
    limit = limits.MAX_DECOMPRESSED_BYTES
    chunks, size, data = [], 0, raw
    try:
        while data:  # one gzip member after another (concatenated members are valid gzip)
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunks.append(member.decompress(data, limit + 1 - size))
            size += len(chunks[-1])
            if size > limit:
                raise TraceFormatError(
                    f"{name}: decompressed size must be at most {limit} bytes (got more)"
                )
            if not member.eof:
                raise TraceFormatError(f"{name}: corrupt gzip data (truncated stream)")
            data = member.unused_data
    except zlib.error as exc:
        raise TraceFormatError(f"{name}: corrupt gzip data ({exc})") from None
    return b"".join(chunks)


def _offsets(data: bytes, most: int) -> Iterator[int]:
    """Byte offsets of the first ``most`` length-prefixed messages (no parsing, no checks)."""
    pos = 0
    for _ in range(most):
        if pos >= len(data):
            return
        size = shift = 0
        while pos < len(data):
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80 or shift > 63:
                break
        yield pos
        pos += size


def _read_et(path: Path, pb: Any, limit: int) -> tuple[Any, list[Any]]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, path.name)
    # count the messages before parsing any (a million empty ones parse slowly)
    for count, _ in enumerate(_offsets(raw, limit + 2), start=0):
        check_count(path.name, "the number of nodes", count, limit, "--max-trace-nodes")
    meta, nodes = pb.GlobalMetadata(), []
    messages = _messages(raw, path.name)
    while True:
        after = f"node {nodes[-1].id}" if nodes else "the metadata"
        try:
            message, offset = next(messages)
        except StopIteration:
            return meta, nodes
        except TraceFormatError as exc:
            raise TraceFormatError(f"{exc} (after {after})") from None
        target = pb.Node() if offset else meta
        try:
            target.ParseFromString(message)
        except Exception as exc:  # protobuf's DecodeError is not exported stably
            raise TraceFormatError(
                f"{path.name}: message at byte {offset}"
                f"{f' (after {after})' if offset else ''} is not a Chakra "
                f"{type(target).__name__} ({exc})"
            ) from None
        if offset:
            nodes.append(target)
            check_count(path.name, "the number of nodes", len(nodes), limit, "--max-trace-nodes")


def _json_objects(text: str, name: str, limit: int) -> list[Any]:
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    except RecursionError:
        raise TraceFormatError(f"{name}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer literal of thousands of digits
        raise TraceFormatError(f"{name}: invalid JSON ({str(exc)[:80]})") from None
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict):
        return [whole]
    decoder, objects, pos = json.JSONDecoder(), [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return objects
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except RecursionError:
            raise TraceFormatError(f"{name}: JSON nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise TraceFormatError(
                f"{name}: invalid JSON after object {len(objects)} ({exc.msg} at char {exc.pos})"
            ) from None
        except ValueError as exc:
            raise TraceFormatError(f"{name}: invalid JSON ({str(exc)[:80]})") from None
        objects.append(obj)
        check_count(name, "the number of nodes", len(objects), limit, "--max-trace-nodes")


def _read_json(path: Path, pb: Any, limit: int) -> tuple[Any, list[Any]]:
    from google.protobuf import json_format

    objects = _json_objects(path.read_text(errors="replace"), path.name, limit)
    check_count(path.name, "the number of nodes", len(objects), limit, "--max-trace-nodes")
    meta, nodes = pb.GlobalMetadata(), []
    for index, obj in enumerate(objects):
        is_meta = index == 0 and isinstance(obj, dict) and "version" in obj and "id" not in obj
        where = f"{path.name}: object {index}"
        if isinstance(obj, dict) and "id" in obj:
            where = f"{path.name}: node {obj['id']!r}"
        try:
            if is_meta:
                json_format.ParseDict(obj, meta)
            else:
                nodes.append(json_format.ParseDict(obj, pb.Node()))
        except Exception as exc:  # json_format.ParseError, and TypeError for non-objects
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TraceFormatError(f"{where}: not a Chakra node ({message})") from None
    return meta, nodes


def _attrs(message: Any) -> dict[str, Any]:
    values = {}
    for attr in message.attr:
        which = attr.WhichOneof("value")
        if which is None:
            continue
        value = getattr(attr, which)
        values[attr.name] = list(value.values) if which.endswith("_list") else value
    return values


class _Node:
    """Typed access to one node's attributes, with errors that locate the node."""

    def __init__(self, where: str, message: Any) -> None:
        self.where = where
        self.attrs = _attrs(message)

    def int(self, name: str, default: int | None = None) -> int:
        value = self.attrs.get(name, default)
        if value is None:
            raise TraceFormatError(f"{self.where}: attribute '{name}' is missing")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TraceFormatError(
                f"{self.where}: attribute '{name}' must be an integer (got {value!r})"
            )
        return value

    def str(self, name: str, default: str = "") -> str:
        value = self.attrs.get(name, default)
        if not isinstance(value, str):
            raise TraceFormatError(f"{self.where}: attribute '{name}' must be a string")
        return value

    def rank(self, name: str) -> int:
        value = self.int(name)
        if not 0 <= value <= MAX_RANK:
            raise TraceFormatError(
                f"{self.where}: attribute '{name}' must be a rank in 0..{MAX_RANK} (got {value})"
            )
        return value

    def ops(self) -> tuple[Op, ...]:
        """The simtrain ops stored as one list attribute per Op field, if any."""
        if "op.kind" not in self.attrs:
            return ()
        columns = {}
        for name in OP_FIELDS:
            column = self.attrs.get(f"op.{name}")
            if column is None and name in _OPTIONAL_OP_FIELDS:
                continue
            if not isinstance(column, list) or len(column) != len(self.attrs["op.kind"]):
                raise TraceFormatError(
                    f"{self.where}: attribute 'op.{name}' must be a list as long as 'op.kind'"
                )
            columns[name] = column
        try:
            return tuple(
                Op(**{name: column[i] for name, column in columns.items()})
                for i in range(len(columns["kind"]))
            )
        except TypeError as exc:
            raise TraceFormatError(f"{self.where}: bad op attributes ({exc})") from None


def _convert(file: str, rank: int, node: Any) -> TraceNode:
    view = _Node(f"{file}: node {node.id} ({node.name or 'unnamed'})", node)
    kind = _KINDS.get(node.type)
    if kind is None:
        raise TraceFormatError(
            f"{view.where}: unknown node type {node.type} (valid: 1-7, METADATA_NODE to "
            "COMM_COLL_NODE)"
        )
    deps = tuple(dict.fromkeys([*node.ctrl_deps, *node.data_deps]))
    check_count(view.where, "the number of dependencies", len(deps), MAX_DEPS_PER_NODE)
    ops = view.ops()
    measured = node.duration_micros * 1e-6 if node.duration_micros else None
    for name in ("num_ops", "tensor_size", "comm_size"):
        if isinstance(view.attrs.get(name), int) and view.attrs[name] > 0:
            limit = MAX_NODE_FLOPS if name == "num_ops" else MAX_NODE_BYTES
            check_quantity(view.where, f"attribute '{name}'", view.attrs[name], limit)
    common: dict[str, Any] = {
        "node_id": node.id,
        "name": node.name,
        "deps": deps,
        "stage": view.int("stage", -1),
        "microbatch": view.int("microbatch", -1),
        "collective_key": view.str("collective_key"),
    }
    if node.type == 1:  # metadata: no work
        return TraceNode(kind="compute", duration_s=0.0, **common)
    if kind == "compute":
        shaped = gemm_op(node.name, node.inputs.shapes, node.inputs.types)
        if not ops and shaped is not None:
            ops = (shaped,)
        if not ops and measured is None:
            ops = (
                Op(
                    node.name or "op",
                    "elementwise",
                    flops=float(view.int("num_ops", 0)),
                    bytes_accessed=float(view.int("tensor_size", 0)),
                ),
            )
        return TraceNode(
            kind="compute",
            stream=view.str("stream", "compute"),
            category=view.str("category", "compute"),
            duration_s=measured,
            ops=ops,
            **common,
        )
    if kind == "collective":
        comm_type = view.int("comm_type")
        if comm_type not in COMM_TYPES:
            raise TraceFormatError(
                f"{view.where}: attribute 'comm_type' must be 0-9 (got {comm_type})"
            )
        size_bytes = view.int("comm_size", 0)
        if size_bytes < 0:
            raise TraceFormatError(f"{view.where}: 'comm_size' must be >= 0 (got {size_bytes})")
        if not ops:
            op = Op(node.name or "collective", "collective", comm=COMM_TYPES[comm_type])
            ops = (dataclasses.replace(op, comm_bytes=float(size_bytes)),)
        group = check_group(view.where, "attribute 'pg_ranks'", view.attrs.get("pg_ranks", []))
        return TraceNode(
            kind="collective",
            stream=view.str("stream", "comm"),
            category=view.str("category", "comm"),
            ops=ops,
            group=group,
            **common,
        )
    src, dst = view.rank("comm_src"), view.rank("comm_dst")
    if rank not in (src, dst):
        raise TraceFormatError(
            f"{view.where}: a transfer of rank {rank} must have it as comm_src or comm_dst "
            f"(got {src} -> {dst})"
        )
    size_bytes = view.int("comm_size", view.int("tensor_size", 0))
    if not ops:
        ops = (Op(node.name or kind, "p2p", comm="send_recv", comm_bytes=float(size_bytes)),)
    peer = dst if kind == "send" else src
    return TraceNode(
        kind=kind,
        stream=view.str("stream", f"{kind}:{peer}"),
        category=view.str("category", "pp_comm"),
        ops=ops,
        group=(src, dst),
        peer=peer,
        tag=view.int("comm_tag", 0),
        **common,
    )


def read_rank_file(path: Path, rank: int, max_nodes: int | None = None) -> RankTrace:
    """Read one Chakra rank file (``.et``, possibly gzipped, or its JSON form).

    Args:
        path: the rank file.
        rank: the rank it describes.
        max_nodes: most nodes accepted (default :data:`MAX_NODES_PER_RANK`).

    Raises:
        TraceFormatError: the file is too large, truncated, not Chakra, or a node is invalid.
    """
    pb = schema()
    check_file_size(path)
    limit = MAX_NODES_PER_RANK if max_nodes is None else max_nodes
    read = _read_json if path.suffix == ".json" else _read_et
    meta, nodes = read(path, pb, limit)
    info = _Node(f"{path.name}: metadata", meta)
    trace = RankTrace(
        path=path.name,
        rank=rank,
        world_size=info.int("world_size", 0),
        weight=info.int("weight", 1),
        accelerator=info.str("accelerator"),
    )
    if not 1 <= trace.weight <= MAX_RANK + 1 or not 0 <= trace.world_size <= MAX_RANK + 1:
        raise TraceFormatError(
            f"{path.name}: metadata 'weight' must be in 1..{MAX_RANK + 1} and 'world_size' in "
            f"0..{MAX_RANK + 1} (got {trace.weight} and {trace.world_size})"
        )
    trace.nodes = [_convert(path.name, rank, node) for node in nodes]
    for node, converted in zip(nodes, trace.nodes, strict=True):
        check_node(f"{path.name}: node {node.id} ({node.name or 'unnamed'})", converted)
    return trace


def read_chakra(directory: Path, max_nodes: int | None = None) -> list[RankTrace]:
    """Read every rank file of a Chakra trace directory, ordered by rank.

    Raises:
        TraceFormatError: see :func:`read_rank_file`.
    """
    files = rank_files(directory)
    check_count(str(directory), "the number of rank files", len(files), MAX_RANK_FILES)
    return [read_rank_file(path, rank, max_nodes) for rank, path in sorted(files.items())]
