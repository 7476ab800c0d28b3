"""Which reductions and changes ctx has made on this machine: outputs to offload directories.

The offload directory's manifest is the truth (every byte is hash-checked on restore); the
index only helps to *find* it: a file reduced twice with different offload directories,
an output that was moved or copied, a session repaired by ``ctx doctor --fix`` and then
reduced, all still restore in one command (:mod:`ctxcli.store.history`). It lives in ctx's
data directory (:func:`~ctxcli.services.dirs.data_dir`, 0700, the file 0600). An index
that cannot be opened is skipped with a note: it is never a reason to fail a run.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from ctxcli.services.dirs import data_dir, private_dir
from ctxcli.store.manifest import Header

__all__ = ["IndexEntry", "ReductionIndex", "remember"]

FILE = "ledger.sqlite3"
"""The file's name from when the index was called the ledger (kept: it holds users' records)."""


@dataclass(frozen=True)
class IndexEntry:
    """One reduction or change: what it wrote, from what, and where its record is."""

    output_sha256: str
    output_bytes: int
    input_sha256: str
    offload_dir: str
    path: str


class ReductionIndex:
    """A small SQLite index of reductions (output hash and path -> offload directory)."""

    def __init__(self, root: Path | None = None, log: Callable[[str], None] | None = None) -> None:
        self.root = root or data_dir()
        self.path = self.root / FILE
        self._log = log or (lambda _msg: None)
        self.problem: str | None = None

    def _connect(self) -> sqlite3.Connection:
        private_dir(self.root, tighten=True)
        fresh = not self.path.exists()
        if fresh:
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(self.path, timeout=10)
        # The manifests are the truth and the index only finds them: a commit need not
        # wait for the disk (an fsync per run was most of a small reduce's time).
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS reductions (output_sha256 TEXT, output_bytes INTEGER,"
            " input_sha256 TEXT, offload_dir TEXT, path TEXT, created REAL,"
            " PRIMARY KEY (output_sha256, offload_dir))"
        )
        return conn

    def _fail(self, exc: Exception) -> None:
        if self.problem is None:
            self.problem = f"index {self.path} is unusable ({exc}); continuing without it"
            self._log(self.problem)

    def record(self, entry: IndexEntry) -> None:
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

    def find(
        self, *, output_sha256: str | None = None, path: str | None = None
    ) -> list[IndexEntry]:
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
        return [IndexEntry(*row) for row in rows]

    def forget(self, offload_dirs: list[str]) -> None:
        """Drop the entries of records that were used up (a restore in place discarded them)."""
        if not offload_dirs or not self.path.exists():
            return
        try:
            with closing(self._connect()) as conn, conn:
                conn.executemany(
                    "DELETE FROM reductions WHERE offload_dir = ?", [(d,) for d in offload_dirs]
                )
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)


def remember(
    header: Header, offload_dir: Path, written: str, log: Callable[[str], None] | None = None
) -> None:
    """Record a committed reduction or change: ``header``'s, undone by ``offload_dir``.

    ``written`` is the resolved path of its output ("" for stdout).
    """
    output = header.output
    entry = IndexEntry(
        output.sha256, output.bytes, header.input.sha256, str(offload_dir.resolve()), written
    )
    ReductionIndex(log=log).record(entry)
