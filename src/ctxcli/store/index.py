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

from ctxcli.core.io import Input
from ctxcli.core.protocols import sha256
from ctxcli.services.dirs import data_dir
from ctxcli.services.kv import OnDamage, Schema, StoreError, exists, opened, transaction
from ctxcli.store.manifest import Header

__all__ = ["HEAD_BYTES", "IndexEntry", "ReductionIndex", "head_digest", "remember"]

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
        # 3: a moved output that its client appended to has a new hash and a new path;
        # its first line (which appending never changes) finds its record. The input's
        # hash and first line find the reductions made *from* a record's output (a
        # restore in place keeps a record they restore through).
        (
            "ALTER TABLE reductions ADD COLUMN output_head TEXT",
            "ALTER TABLE reductions ADD COLUMN input_head TEXT",
            "CREATE INDEX reductions_head ON reductions (output_head)",
            "CREATE INDEX reductions_input ON reductions (input_sha256)",
            "CREATE INDEX reductions_input_head ON reductions (input_head)",
        ),
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
    output_head: str | None = None
    """sha256 of the output's first line (:func:`head_digest`)."""
    input_head: str | None = None
    """sha256 of the input's first line."""


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
                    "INSERT OR REPLACE INTO reductions (output_sha256, output_bytes,"
                    " input_sha256, offload_dir, path, created, output_head, input_head)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        entry.output_sha256,
                        entry.output_bytes,
                        entry.input_sha256,
                        entry.offload_dir,
                        entry.path,
                        time.time(),
                        entry.output_head,
                        entry.input_head,
                    ),
                )
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._fail(exc)

    def find(
        self,
        *,
        output_sha256: str | None = None,
        path: str | None = None,
        output_head: str | None = None,
        input_sha256: str | None = None,
        input_head: str | None = None,
        offload_dir: str | None = None,
    ) -> list[IndexEntry]:
        """Return the reductions that match any of the keys given (newest first).

        The keys: the output's hash or first line, the path written, the input's hash or
        first line, the record.
        """
        if not exists(self.path, SCHEMA):
            return []
        clauses, args = [], []
        if output_sha256 is not None:
            clauses.append("output_sha256 = ?")
            args.append(output_sha256)
        if path is not None:
            clauses.append("path = ?")
            args.append(path)
        for column, value in (
            ("output_head", output_head),
            ("input_sha256", input_sha256),
            ("input_head", input_head),
            ("offload_dir", offload_dir),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if not clauses:
            return []
        try:
            with opened(self.path, SCHEMA) as db:
                rows = db.execute(
                    "SELECT output_sha256, output_bytes, input_sha256, offload_dir, path,"
                    f" output_head, input_head FROM reductions WHERE {' OR '.join(clauses)} ORDER BY created DESC",
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


HEAD_BYTES = 1 << 16
"""How much of an output's first line :func:`head_digest` reads at most."""


def head_digest(start: Input | memoryview) -> str:
    """sha256 of the first line of ``start`` (through its newline; at most 64 KiB).

    Lines appended to a file never change it, so a reduced session that its client
    appended to, moved or not, is found by it.
    """
    view = bytes(start[:HEAD_BYTES])
    end = view.find(b"\n")
    return sha256(view if end < 0 else view[: end + 1])


def remember(
    header: Header,
    offload_dir: Path,
    written: str,
    log: Callable[[str], None] | None = None,
    *,
    head: str | None = None,
    input_head: str | None = None,
) -> None:
    """Record a committed reduction or change: ``header``'s, undone by ``offload_dir``.

    ``written`` is the resolved path of its output ("" for stdout); ``head`` and
    ``input_head`` are the :func:`head_digest` of the output and of the input.
    """
    output = header.output
    entry = IndexEntry(
        output.sha256,
        output.bytes,
        header.input.sha256,
        str(offload_dir.resolve()),
        written,
        head,
        input_head,
    )
    ReductionIndex(log=log).record(entry)
