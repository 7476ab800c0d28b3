"""Which reductions and changes ctx has made on this machine: outputs to offload directories.

The offload directory's manifest is the truth (every byte is hash-checked on restore); the
index only helps to *find* it: a file reduced twice with different offload directories,
an output that was moved or copied, a session repaired by ``ctx doctor --fix`` and then
reduced, all still restore in one command (:mod:`ctxcli.store.history`). It lives in ctx's
data directory (:func:`~ctxcli.services.dirs.data_dir`, 0700, the file 0600), opened by
:mod:`ctxcli.services.kv`: an older ctx's index is upgraded in place, one this user may
not write is still read. Unlike a cache it is never started anew: a damaged index (or a
newer ctx's) is left exactly as it is and skipped with a one-line note naming the file
and what to do; it is never a reason to fail a run either.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ctxcli.services.dirs import data_dir
from ctxcli.services.kv import OnDamage, Schema, StoreError, exists, opened, transaction
from ctxcli.store.manifest import Header

__all__ = ["IndexEntry", "ReductionIndex", "remember"]

FILE = "reductions.sqlite3"
"""The index's file in ctx's data directory."""

FORMER_FILE = "ledger.sqlite3"
"""Its name from when the index was called the ledger: the first open moves it to :data:`FILE`."""

SCHEMA = Schema(
    "reduction index",
    steps=(
        # 1: the table of rounds one and two (their files carry no version).
        (
            "CREATE TABLE IF NOT EXISTS reductions (output_sha256 TEXT, output_bytes INTEGER,"
            " input_sha256 TEXT, offload_dir TEXT, path TEXT, created REAL,"
            " PRIMARY KEY (output_sha256, offload_dir))",
        ),
        # 2: every restore and in-place reduce looks up by path too, which scanned the
        # whole table (20 ms at 100,000 entries; 0.02 ms with this index).
        ("CREATE INDEX reductions_path ON reductions (path)",),
    ),
    on_damage=OnDamage.REFUSE,
    read_only_reads=True,
    former_names=(FORMER_FILE,),
)


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

    def _fail(self, exc: Exception) -> None:
        if self.problem is None:
            if isinstance(exc, StoreError):  # names the file and what to do already
                self.problem = f"{exc}; continuing without it"
            else:
                self.problem = f"index {self.path} is unusable ({exc}); continuing without it"
            self._log(self.problem)

    def record(self, entry: IndexEntry) -> None:
        """Remember a committed reduction."""
        try:
            with opened(self.path, SCHEMA) as db, transaction(db):
                db.execute(
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
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._fail(exc)

    def find(
        self, *, output_sha256: str | None = None, path: str | None = None
    ) -> list[IndexEntry]:
        """Reductions whose output has this hash, or that wrote to this path (newest first)."""
        if not exists(self.path, SCHEMA):
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
            with opened(self.path, SCHEMA) as db:
                rows = db.execute(
                    "SELECT output_sha256, output_bytes, input_sha256, offload_dir, path"
                    f" FROM reductions WHERE {' OR '.join(clauses)} ORDER BY created DESC",
                    args,
                ).fetchall()
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._fail(exc)
            return []
        return [IndexEntry(*row) for row in rows]

    def forget(self, offload_dirs: list[str]) -> None:
        """Drop the entries of records that were used up (a restore in place discarded them)."""
        if not offload_dirs or not exists(self.path, SCHEMA):
            return
        try:
            with opened(self.path, SCHEMA) as db, transaction(db):
                db.executemany(
                    "DELETE FROM reductions WHERE offload_dir = ?", [(d,) for d in offload_dirs]
                )
        except (sqlite3.Error, OSError, StoreError) as exc:
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
