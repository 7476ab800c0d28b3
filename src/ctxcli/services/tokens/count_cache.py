"""An on-disk cache of token counts, so a rerun only counts what is new.

Counting is the slow part of ``ctx stats`` and ``ctx reduce``. A session that grew by
a few messages since the last run holds the same texts plus a few new ones, so the
counts of earlier runs are kept in a SQLite database keyed by tokenizer and a hash of
the text (never the text itself).

The database is opened by :mod:`ctxcli.services.kv` (private, WAL: several ``ctx``
processes read and write it at once, ``--jobs`` or two terminals; every write is one
short transaction; an older ctx's file is upgraded). The cache holds at most
``max_entries`` counts and drops the least recently used ones first. It is an
optimisation only: a damaged file is started anew, and when the database cannot be
opened or written (read-only home, full disk, a newer ctx's file), the run goes on
without it.

Location: ``$CTX_CACHE_DIR/token-counts.sqlite3``, else ``~/.cache/ctx/``.
``CTX_NO_CACHE=1`` (or ``--no-cache``) turns it off.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ctxcli.services.dirs import cache_dir
from ctxcli.services.kv import OnDamage, Schema, StoreError, connect, select_in, transaction
from ctxcli.services.kv import make_private as make_private  # its home before services.kv

__all__ = [
    "DB_NAME",
    "DEFAULT_MAX_ENTRIES",
    "MAX_BLOBS",
    "SCHEMA",
    "TokenCache",
    "cache_disabled",
]

DB_NAME = "token-counts.sqlite3"
DEFAULT_MAX_ENTRIES = 1_000_000
"""About 60 MB on disk; a long coding session has a few thousand distinct long texts."""

_TOUCH_AFTER_S = 3600
"""A hit refreshes its last-use time at most this often, so reruns stay read-only."""

SCHEMA = Schema(
    "token cache",
    steps=(
        # 1: the tables of rounds one and two (their files carry no version; the blobs
        # table came later, so a round-one file gains it here).
        (
            "CREATE TABLE IF NOT EXISTS counts (tokenizer TEXT NOT NULL, digest BLOB NOT NULL,"
            " tokens INTEGER NOT NULL, used INTEGER NOT NULL, PRIMARY KEY (tokenizer, digest))"
            " WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS counts_used ON counts (used)",
            "CREATE TABLE IF NOT EXISTS blobs (key BLOB PRIMARY KEY, value BLOB NOT NULL,"
            " used INTEGER NOT NULL)",
        ),
    ),
    on_damage=OnDamage.REBUILD,
)
"""The counts and whole ``ctx stats`` results (:mod:`ctxcli.pipeline.stats_cache`)."""

MAX_BLOBS = 2000
"""Whole results kept (``ctx stats`` reports, a few kB each)."""


def cache_disabled() -> bool:
    """True when ``CTX_NO_CACHE`` is set to anything but empty or ``0``."""
    return os.environ.get("CTX_NO_CACHE", "") not in ("", "0")


class TokenCache:
    """Token counts by (tokenizer, text digest) in a SQLite file.

    Args:
        path: the database file (created with its directory if missing).
        max_entries: counts kept at most; the least recently used go first.
        log: receives one warning if the cache stops working during the run, or was
            damaged and started anew.
        repair: start a damaged file anew (False: refuse it, see :func:`open_default`).
    """

    def __init__(
        self,
        path: Path,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        log: Callable[[str], None] | None = None,
        repair: bool = True,
    ) -> None:
        self.path = path
        self.max_entries = max_entries
        self._log = log
        self._db: sqlite3.Connection | None = connect(path, SCHEMA, log, repair=repair)

    @classmethod
    def open_default(
        cls, log: Callable[[str], None] | None = None, *, repair: bool = True
    ) -> TokenCache | None:
        """The user's cache, or None when it is turned off or cannot be opened.

        ``repair=False`` leaves a damaged file to a later opener (None here): one that
        cannot pass on the warning that it was started anew.
        """
        if cache_disabled():
            return None
        path = cache_dir() / DB_NAME
        try:
            return cls(path, log=log, repair=repair)
        except (sqlite3.Error, OSError, StoreError) as exc:
            if log is not None:
                log(f"token cache {path} is unusable ({exc}); counting without it")
            return None

    def _fail(self, exc: Exception) -> None:
        # One warning, then the run carries on uncached.
        if self._log is not None:
            self._log(f"token cache {self.path} stopped working ({exc}); counting without it")
        self.close()

    def get_many(self, tokenizer: str, digests: Sequence[bytes]) -> dict[bytes, int]:
        """The cached counts among ``digests`` (missing ones are absent)."""
        db = self._db
        if db is None or not digests:
            return {}
        found: dict[bytes, int] = {}
        stale: list[bytes] = []
        now = int(time.time())
        try:
            rows = select_in(
                db,
                "SELECT digest, tokens, used FROM counts WHERE tokenizer = ? AND digest IN ({marks})",
                (tokenizer,),
                digests,
            )
            for digest, tokens, used in rows:
                found[digest] = tokens
                if now - used > _TOUCH_AFTER_S:
                    stale.append(digest)
            if stale:
                with transaction(db):
                    db.executemany(
                        "UPDATE counts SET used = ? WHERE tokenizer = ? AND digest = ?",
                        [(now, tokenizer, d) for d in stale],
                    )
        except sqlite3.Error as exc:
            self._fail(exc)
        return found

    def put_many(self, tokenizer: str, items: Iterable[tuple[bytes, int]]) -> None:
        """Store counts; then drop the oldest entries if the cache is over its bound."""
        db = self._db
        rows = [(tokenizer, digest, tokens, int(time.time())) for digest, tokens in items]
        if db is None or not rows:
            return
        try:
            with transaction(db):
                db.executemany(
                    "INSERT OR REPLACE INTO counts (tokenizer, digest, tokens, used) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._evict(db)
        except sqlite3.Error as exc:
            self._fail(exc)

    def _evict(self, db: sqlite3.Connection) -> None:
        (size,) = db.execute("SELECT count(*) FROM counts").fetchone()
        if size <= self.max_entries:
            return
        # Drop a tenth more than needed so the next runs do not evict again at once.
        drop = size - self.max_entries + self.max_entries // 10
        db.execute(
            "DELETE FROM counts WHERE (tokenizer, digest) IN "
            "(SELECT tokenizer, digest FROM counts ORDER BY used LIMIT ?)",
            (drop,),
        )

    def get_blob(self, key: bytes) -> bytes | None:
        """A whole stored result (see :mod:`ctxcli.pipeline.stats_cache`), or None."""
        db = self._db
        if db is None:
            return None
        try:
            row = db.execute("SELECT value, used FROM blobs WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            now = int(time.time())
            if now - row[1] > _TOUCH_AFTER_S:
                with transaction(db):
                    db.execute("UPDATE blobs SET used = ? WHERE key = ?", (now, key))
            return bytes(row[0])
        except sqlite3.Error as exc:
            self._fail(exc)
            return None

    def put_blob(self, key: bytes, value: bytes) -> None:
        """Store a whole result; the oldest go when there are more than ``MAX_BLOBS``."""
        db = self._db
        if db is None:
            return
        try:
            with transaction(db):
                db.execute(
                    "INSERT OR REPLACE INTO blobs (key, value, used) VALUES (?, ?, ?)",
                    (key, value, int(time.time())),
                )
                db.execute(
                    "DELETE FROM blobs WHERE key NOT IN "
                    "(SELECT key FROM blobs ORDER BY used DESC LIMIT ?)",
                    (MAX_BLOBS,),
                )
        except sqlite3.Error as exc:
            self._fail(exc)

    def __len__(self) -> int:
        if self._db is None:
            return 0
        (size,) = self._db.execute("SELECT count(*) FROM counts").fetchone()
        return int(size)

    def close(self) -> None:
        """Close the database (the cache then answers nothing and stores nothing)."""
        if self._db is not None:
            try:
                self._db.close()
            finally:
                self._db = None
