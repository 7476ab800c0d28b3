"""Which reductions ctx has made on this machine: an index from outputs to offload directories.

The offload directory's manifest is the truth (every byte is hash-checked on restore); the
ledger only helps to *find* it: a file reduced twice with different offload directories,
or an output that was moved, still restores in one command. It lives in ``$CTX_DATA_DIR``,
else ``$XDG_DATA_HOME/ctx``, else ``~/.local/share/ctx`` (0700, the file 0600). A ledger that
cannot be opened is skipped with a note: it is never a reason to fail a run.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from ctxcli.services.dirs import data_dir

__all__ = ["Entry", "Ledger"]

FILE = "ledger.sqlite3"


@dataclass(frozen=True)
class Entry:
    """One reduction: what it wrote, from what, and where the removed text went."""

    output_sha256: str
    output_bytes: int
    input_sha256: str
    offload_dir: str
    path: str


class Ledger:
    """A small SQLite index of reductions (output hash and path -> offload directory)."""

    def __init__(self, root: Path | None = None, log: Callable[[str], None] | None = None) -> None:
        self.root = root or data_dir()
        self.path = self.root / FILE
        self._log = log or (lambda _msg: None)
        self.problem: str | None = None

    def _connect(self) -> sqlite3.Connection:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fresh = not self.path.exists()
        if fresh:
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(self.path, timeout=10)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS reductions (output_sha256 TEXT, output_bytes INTEGER,"
            " input_sha256 TEXT, offload_dir TEXT, path TEXT, created REAL,"
            " PRIMARY KEY (output_sha256, offload_dir))"
        )
        return conn

    def _fail(self, exc: Exception) -> None:
        if self.problem is None:
            self.problem = f"ledger {self.path} is unusable ({exc}); continuing without it"
            self._log(self.problem)

    def record(self, entry: Entry) -> None:
        """Remember a committed reduction."""
        try:
            with closing(self._connect()) as conn, conn:
                conn.execute(
                    "INSERT OR REPLACE INTO reductions VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry.output_sha256,
                        entry.output_bytes,
                        entry.input_sha256,
                        entry.offload_dir,
                        entry.path,
                        time.time(),
                    ),
                )
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)

    def find(self, *, output_sha256: str | None = None, path: str | None = None) -> list[Entry]:
        """Reductions whose output has this hash, or that wrote to this path (newest first)."""
        if not self.path.exists():
            return []
        clauses, args = [], []
        if output_sha256 is not None:
            clauses.append("output_sha256 = ?")
            args.append(output_sha256)
        if path is not None:
            clauses.append("path = ?")
            args.append(path)
        if not clauses:
            return []
        try:
            with closing(self._connect()) as conn:
                rows = conn.execute(
                    "SELECT output_sha256, output_bytes, input_sha256, offload_dir, path"
                    f" FROM reductions WHERE {' OR '.join(clauses)} ORDER BY created DESC",
                    args,
                ).fetchall()
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)
            return []
        return [Entry(*row) for row in rows]
