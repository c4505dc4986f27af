"""The sweep result store: one embedded SQLite file, one row per evaluated configuration.

Rows are keyed by :func:`~simtrain.sweep.enumerate.config_key` (hash of the resolved spec and
the simtrain version) and committed one by one as configurations finish, in WAL mode: a
Ctrl-C, a killed worker or a killed driver loses nothing already written, and a resumed sweep
skips every key present. Only the driver writes, so there is never a concurrent writer.
Configurations pruned by the cheap checks are not stored (they are recomputed in
microseconds); ``oom`` verdicts are, because the memory estimate is the costly part of pruning.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simtrain.errors import SpecError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT NOT NULL,
    row_json TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    finished_unix_s REAL NOT NULL
)
"""


_COLUMNS = ("key", "version", "status", "error", "row_json", "spec_json", "finished_unix_s")


@contextmanager
def _store_errors(path: str) -> Iterator[None]:
    """Turn SQLite and file-system errors on the store into one-line SpecErrors."""
    try:
        yield
    except sqlite3.Error as exc:
        raise SpecError(
            f"'--store' must be a readable and writable SQLite store (got '{path}': {exc})"
        ) from None
    except OSError as exc:
        raise SpecError(
            f"'--store' must be a writable path (got '{path}': {exc.strerror})"
        ) from None


class ResultStore:
    """Results of a sweep in a SQLite file (or in memory for ``":memory:"``).

    Examples:
        >>> store = ResultStore(":memory:")
        >>> store.put("k1", "0.1.0", {"status": "ok", "error": "", "mfu": 0.5}, {})
        >>> store.get_all()["k1"]["mfu"], len(store)
        (0.5, 1)
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with _store_errors(self.path):
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path)
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            self._db.execute(_SCHEMA)
            self._db.commit()
            columns = tuple(row[1] for row in self._db.execute("PRAGMA table_info(results)"))
        if columns != _COLUMNS:
            self._db.close()
            raise SpecError(
                f"'--store' must be a simtrain result store (got '{self.path}': a SQLite file "
                f"whose 'results' table has columns {', '.join(columns)})"
            )

    def __len__(self) -> int:
        with _store_errors(self.path):
            return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def keys(self) -> set[str]:
        """Keys of every stored configuration."""
        with _store_errors(self.path):
            return {k for (k,) in self._db.execute("SELECT key FROM results")}

    def put(self, key: str, version: str, row: dict[str, Any], spec: dict[str, Any]) -> None:
        """Store one finished configuration and commit at once (so a kill cannot lose it)."""
        with _store_errors(self.path):
            self._put(key, version, row, spec)

    def _put(self, key: str, version: str, row: dict[str, Any], spec: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                version,
                row["status"],
                row.get("error", ""),
                json.dumps(row),
                json.dumps(spec, sort_keys=True),
                time.time(),
            ),
        )
        self._db.commit()

    def get_all(self) -> dict[str, dict[str, Any]]:
        """Every stored row by key."""
        with _store_errors(self.path):
            rows = list(self._db.execute("SELECT key, row_json FROM results"))
        out: dict[str, dict[str, Any]] = {}
        for key, text in rows:
            try:
                row = json.loads(text)
            except (TypeError, ValueError):
                row = None
            if not isinstance(row, dict):
                raise SpecError(
                    f"'--store' must hold rows simtrain wrote (got '{self.path}': row {key!r} is "
                    "not a JSON object; use --overwrite or another store)"
                )
            out[key] = row
        return out

    def clear(self) -> None:
        """Delete every stored row (a fresh sweep into an existing file)."""
        with _store_errors(self.path):
            self._db.execute("DELETE FROM results")
            self._db.commit()

    def close(self) -> None:
        """Close the database."""
        self._db.close()
