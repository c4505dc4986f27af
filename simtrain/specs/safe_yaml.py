"""The YAML front door: every YAML text simtrain reads goes through :func:`load_yaml_text`.

PyYAML's ``safe_load`` refuses code-running tags but not the other classic attacks, which
this loader refuses with one :class:`~simtrain.errors.SpecError` line each:

* **alias bombs** ("billion laughs"): at most :data:`MAX_ALIASES` aliases, and at most
  :data:`MAX_NODES` nodes once every alias is expanded (counted while composing, before any
  expansion happens);
* **deep nesting**: at most :data:`MAX_DEPTH` nested collections (PyYAML's composer recurses
  per level, so a deeper file would end in a ``RecursionError``);
* **duplicate keys**: two ``parallel:`` sections are an error, not "the last one wins";
* **huge numbers written out**: integers of more than :data:`MAX_INT_DIGITS` digits (Python
  refuses to convert 4,300 digits and more, with a traceback);
* **huge files**: files over :data:`MAX_FILE_BYTES` are refused before reading; FIFOs,
  devices and directories are refused before opening.

The limits are far above any experiment, sweep or topology a person writes (the largest
shipped file has a few hundred nodes and no alias).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from simtrain.errors import SpecError

MAX_FILE_BYTES = 1024 * 1024
"""Largest YAML file read (1 MiB; the largest shipped file is under 4 KiB)."""
MAX_ALIASES = 128
"""Most ``*alias`` references in one document."""
MAX_NODES = 20_000
"""Most scalars, sequences and mappings in one document, and with every alias expanded
(the largest shipped file has a few hundred)."""
MAX_DEPTH = 64
"""Deepest nesting of sequences and mappings."""
MAX_INT_DIGITS = 30
"""Longest integer literal (2**64 has 20 digits; nothing simtrain reads needs more)."""


def _where(node: Node | None) -> str:
    if node is None or node.start_mark is None:
        return ""
    return f" at line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


class _LimitError(Exception):
    """A limit of the front door was exceeded (turned into a SpecError by the caller)."""


try:  # libyaml scans and parses in C (fast); composing and constructing stay in Python
    from yaml._yaml import CParser as _EventSource

    def _init_source(loader: Any, stream: str) -> None:
        _EventSource.__init__(loader, stream)

    _SOURCES: tuple[type, ...] = (_EventSource,)
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    def _init_source(loader: Any, stream: str) -> None:
        Reader.__init__(loader, stream)
        Scanner.__init__(loader)
        Parser.__init__(loader)

    _SOURCES = (Reader, Scanner, Parser)


class _BoundedLoader(*_SOURCES, Composer, SafeConstructor, Resolver):  # type: ignore[misc]
    """A safe loader with alias, size, depth, duplicate-key and integer-length limits.

    Events come from libyaml when PyYAML has it (scanning a 4 MiB file takes 0.1 s in C
    and 10 s in Python); nodes are composed here, in Python, so every limit is checked as
    each node is made, before the next one is read.
    """

    def __init__(self, stream: str) -> None:
        _init_source(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._num_aliases = 0
        self._num_nodes = 0
        self._depth = 0
        self._weight: dict[int, int] = {}

    get_single_node = Composer.get_single_node  # the Python composer, not libyaml's

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        """Compose one node, counting aliases, nodes, depth and the expanded size."""
        self._num_nodes += 1
        if self._num_nodes > MAX_NODES:
            event = self.peek_event()
            line = event.start_mark.line + 1 if event.start_mark else 0
            raise _LimitError(f"must have at most {MAX_NODES:,} values (got more, at line {line})")
        if self.check_event(yaml.AliasEvent):
            self._num_aliases += 1
            if self._num_aliases > MAX_ALIASES:
                event = self.peek_event()
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise _LimitError(
                    f"must use at most {MAX_ALIASES} aliases (got more, at line {line})"
                )
            return Composer.compose_node(self, parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise _LimitError(
                    f"must nest at most {MAX_DEPTH} levels deep (got more, at line {line})"
                )
            node = Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1
        weight = 1
        if isinstance(node, SequenceNode):
            weight += sum(self._weight.get(id(child), 1) for child in node.value)
        elif isinstance(node, MappingNode):
            weight += sum(
                self._weight.get(id(k), 1) + self._weight.get(id(v), 1) for k, v in node.value
            )
            _check_duplicates(node)
        self._weight[id(node)] = weight
        if weight > MAX_NODES:
            raise _LimitError(
                f"must have at most {MAX_NODES} values with aliases expanded "
                f"(got {weight:,}{_where(node)})"
            )
        return node

    def construct_yaml_int(self, node: ScalarNode) -> int:
        """An integer, refusing absurdly long literals before Python converts them."""
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise _LimitError(
                f"must write integers with at most {MAX_INT_DIGITS} digits "
                f"(got {digits} digits{_where(node)})"
            )
        return SafeConstructor.construct_yaml_int(self, node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _check_duplicates(node: MappingNode) -> None:
    seen: dict[tuple[str, str], Node] = {}
    for key, _ in node.value:
        if not isinstance(key, ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        ident = (key.tag, key.value)
        if ident in seen:
            raise _LimitError(
                f"must not repeat the key '{key.value[:60]}' in one mapping "
                f"(got it again{_where(key)}, first{_where(seen[ident])})"
            )
        seen[ident] = key


def load_yaml_text(text: str, source: str) -> Any:
    r"""Parse YAML text under the front door's limits.

    Args:
        text: the YAML document.
        source: how to name the input in errors (a file name or ``--set key``).

    Raises:
        SpecError: invalid YAML or a limit exceeded; the message names ``source``.

    Examples:
        >>> load_yaml_text("a: 1\nb: [2, 3]", "x.yaml")
        {'a': 1, 'b': [2, 3]}
        >>> load_yaml_text("a: 1\na: 2", "x.yaml")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        simtrain.errors.SpecError: 'x.yaml' must not repeat the key 'a' in one mapping ...
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except _LimitError as exc:
        raise SpecError(f"'{source}' {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"'{source}' must be valid YAML (got {problem}{where})") from None
    except (ValueError, RecursionError, OverflowError) as exc:
        raise SpecError(f"'{source}' must be valid YAML (got {type(exc).__name__})") from None
    finally:
        loader.dispose()


def read_text_file(path: Path, what: str = "file", max_bytes: int = MAX_FILE_BYTES) -> str:
    """Read a regular UTF-8 text file of at most ``max_bytes``, refusing anything else.

    FIFOs, devices, directories, symbolic-link loops, paths with NUL bytes and oversized
    files are refused before a byte is read, so reading never blocks or exhausts memory.

    Raises:
        SpecError: the path is not a readable regular text file of bounded size.
    """
    shown = str(path)
    try:
        info = os.stat(path)
    except ValueError:
        raise SpecError(f"'{shown[:200]}' must be a file path without NUL bytes") from None
    except OSError as exc:
        if os.path.islink(path):
            raise SpecError(
                f"'{shown}' must be a readable {what} (got a broken or looping symbolic link)"
            ) from None
        problem = "it does not exist" if isinstance(exc, FileNotFoundError) else exc.strerror
        raise SpecError(f"'{shown}' must be an existing {what} ({problem})") from None
    if stat.S_ISDIR(info.st_mode):
        raise SpecError(f"'{shown}' must be a {what} (got a directory)")
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(f"'{shown}' must be a regular {what} (got a device, pipe or socket)")
    if info.st_size > max_bytes:
        raise SpecError(
            f"'{shown}' must be at most {max_bytes:,} bytes (got {info.st_size:,} bytes)"
        )
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(max_bytes + 1)
    except UnicodeDecodeError:
        raise SpecError(f"'{shown}' must be a UTF-8 text file (got binary data)") from None
    except OSError as exc:
        raise SpecError(f"'{shown}' must be a readable {what} (got {exc.strerror})") from None


def read_yaml_file(path: str | Path) -> Any:
    """Read and parse one YAML file through the front door (any top-level value)."""
    path = Path(path)
    return load_yaml_text(read_text_file(path, "YAML file"), str(path))
