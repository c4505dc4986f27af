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
from pathlib import Path
from typing import Any

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
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
        self._db.execute(_SCHEMA)
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def keys(self) -> set[str]:
        """Keys of every stored configuration."""
        return {k for (k,) in self._db.execute("SELECT key FROM results")}

    def put(self, key: str, version: str, row: dict[str, Any], spec: dict[str, Any]) -> None:
        """Store one finished configuration and commit at once (so a kill cannot lose it)."""
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
        return {k: json.loads(r) for k, r in self._db.execute("SELECT key, row_json FROM results")}

    def clear(self) -> None:
        """Delete every stored row (a fresh sweep into an existing file)."""
        self._db.execute("DELETE FROM results")
        self._db.commit()

    def close(self) -> None:
        """Close the database."""
        self._db.close()
