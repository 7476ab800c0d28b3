"""The answer cache: JSON values by key in one SQLite file, shared by the model services.

The classifier and the summarizer keep the model's answers here (one namespace
each) so a rerun makes no request. It sits beside the token-count cache
(``$CTX_CACHE_DIR``, else ``~/.cache/ctx``); keys come from :func:`digest`. The file is
opened by :mod:`ctxcli.services.kv` (private, WAL, upgraded from an older ctx's file,
started anew when damaged).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxcli.services.kv import OnDamage, Schema, StoreError, opened, select_in, transaction

__all__ = ["AnswerCache", "SCHEMA", "digest"]

SCHEMA = Schema(
    "answer cache",
    steps=(
        # 1: the table of round two (its files carry no version).
        (
            "CREATE TABLE IF NOT EXISTS entries (ns TEXT, key TEXT, value TEXT, PRIMARY KEY (ns, key))",
        ),
    ),
    on_damage=OnDamage.REBUILD,
)


class AnswerCache:
    """A small JSON key-value store in one SQLite file, safe across threads and processes.

    Nothing touches the disk until the first ``put``. A damaged file is started anew; a
    cache that cannot be opened (read-only home, a newer ctx's file) is switched off, and
    :attr:`problem` says why: the cache saves money and time but is never a reason to
    fail a run.
    """

    FILE = "cache.sqlite3"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / self.FILE
        self.problem: str | None = None
        self._lock = threading.Lock()

    def _fail(self, exc: Exception) -> None:
        self.problem = (
            f"cache {self.path} is unusable ({type(exc).__name__}: {exc}); continuing without it"
        )

    def get_many(self, namespace: str, keys: Sequence[str]) -> dict[str, Any]:
        """The cached values of ``keys`` that exist (missing keys are left out)."""
        if self.problem or not keys or not self.path.exists():
            return {}
        found: dict[str, Any] = {}
        with self._lock:
            try:
                with opened(self.path, SCHEMA) as db:
                    sql = "SELECT key, value FROM entries WHERE ns = ? AND key IN ({marks})"
                    for key, value in select_in(db, sql, (namespace,), keys):
                        found[key] = json.loads(value)
            except (sqlite3.Error, OSError, ValueError, StoreError) as exc:
                self._fail(exc)
                return {}
        return found

    def get(self, namespace: str, key: str) -> Any | None:
        """One cached value, or None."""
        return self.get_many(namespace, [key]).get(key)

    def put_many(self, namespace: str, items: Mapping[str, Any]) -> None:
        """Store JSON-serialisable values."""
        if self.problem or not items:
            return
        with self._lock:
            try:
                with opened(self.path, SCHEMA) as db, transaction(db):
                    db.executemany(
                        "INSERT OR REPLACE INTO entries (ns, key, value) VALUES (?, ?, ?)",
                        [(namespace, k, json.dumps(v)) for k, v in items.items()],
                    )
            except (sqlite3.Error, OSError, StoreError) as exc:
                self._fail(exc)

    def put(self, namespace: str, key: str, value: Any) -> None:
        """Store one JSON-serialisable value."""
        self.put_many(namespace, {key: value})


def digest(*parts: str) -> str:
    """A cache key for ``parts`` (separated so ``("ab", "c")`` and ``("a", "bc")`` differ)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()
