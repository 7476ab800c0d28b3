"""ctx's own SQLite databases: one way to open them, and a migration list per database.

The token-count cache, the answer cache and the reduction index each keep a SQLite file.
:func:`connect` opens any of them the same way:

- **private**: the directory 0700 and the file 0600 (:func:`make_private`); SQLite gives
  its ``-wal``/``-shm``/``-journal`` files the database's own mode;
- **shared**: WAL, so several ctx processes read while one writes, each write one short
  ``BEGIN IMMEDIATE`` transaction (:func:`transaction`) that waits up to
  :data:`BUSY_TIMEOUT_S` for the lock; ``synchronous=NORMAL``, because what they hold can
  be found again (counts, answers) or is only a finder (the index: the manifests are the
  truth);
- **renamed without loss**: a database whose file was renamed lists its former names
  (:attr:`Schema.former_names`); the first open under the new name moves the former file's
  rows there (:func:`adopt_former`), so no user's records stay behind under the old name;
- **versioned**: a :class:`Schema` lists the SQL steps that built the database, and
  ``PRAGMA user_version`` records how many ran. Opening runs the missing ones in one
  transaction, one process at a time (a lock file beside the database, taken only then),
  so a file of an older ctx is upgraded in place, never discarded. Step 1 of
  each list is the schema of the files written before versions existed (``user_version``
  0), in ``IF NOT EXISTS`` form, so it adopts them as they are.

What cannot be used is decided per database (:class:`OnDamage`): a damaged cache is
started anew (it only saves time), a damaged record is refused and left as it is. A file
written by a newer ctx (a version this list does not reach) is refused either way: its
rows may mean what this ctx cannot know, and writing to it could break the newer ctx.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.services.dirs import private_dir
from ctxcli.services.lock import file_lock

__all__ = [
    "BUSY_TIMEOUT_S",
    "OnDamage",
    "Schema",
    "StoreError",
    "adopt_former",
    "connect",
    "exists",
    "make_private",
    "opened",
    "select_in",
    "transaction",
]

BUSY_TIMEOUT_S = 10.0
"""How long a statement waits for another process's write lock before it fails."""

_BATCH = 500
"""Keys per ``IN (...)`` (under SQLite's oldest limit of 999 host parameters)."""

_SIDECARS = ("-wal", "-shm", "-journal")


class OnDamage(Enum):
    """What :func:`connect` does with a file SQLite reports as damaged."""

    REBUILD = "rebuild"
    """A cache: delete it and start an empty one (under a lock, once for all processes)."""
    REFUSE = "refuse"
    """A record: raise :class:`StoreError` and leave the file exactly as it is."""


@dataclass(frozen=True)
class Schema:
    """One database's migration list and what to do when its file cannot be used.

    Attributes:
        name: what the database is, for messages ("token cache").
        steps: the SQL statements of each step, oldest first; after step N has run,
            ``user_version`` is N. Append steps; never edit or reorder one that shipped.
        on_damage: rebuild or refuse a damaged file.
        read_only_reads: a file this user may not write is still opened for reading (not
            upgraded, so the reads must work on every version of the list).
        former_names: names the file had before (in the same directory), newest first;
            the first open under the current name adopts the first one found.
    """

    name: str
    steps: tuple[tuple[str, ...], ...]
    on_damage: OnDamage
    read_only_reads: bool = False
    former_names: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        """The ``user_version`` of a file this list brought up to date."""
        return len(self.steps)


class StoreError(CtxError):
    """A database cannot be used: damaged (and not a cache), or written by a newer ctx."""


def make_private(path: Path) -> None:
    """Create the SQLite file ``path`` (if missing) private: its directory 0700, itself 0600.

    The databases hold summaries, classifications and paths of private transcripts.
    SQLite creates ``-wal``/``-shm``/``-journal`` files with the database's own mode, so a
    0600 database keeps them private too; files an older ctx left readable are tightened
    on the way.
    """
    parent = private_dir(path.parent)  # and every folder it creates on the way: 0700
    _tighten(parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for suffix in ("", *_SIDECARS):
        _tighten(Path(f"{path}{suffix}"))


def _tighten(path: Path) -> None:
    """Drop group and other permissions from ``path`` if it is ours and has any."""
    if os.name != "posix":
        return  # no owner ids or permission bits to drop (and no os.getuid)
    try:
        st = path.lstat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077 and not path.is_symlink():
            os.chmod(path, st.st_mode & 0o700)
    except OSError:
        pass


def connect(
    path: Path, schema: Schema, log: Callable[[str], None] | None = None, *, repair: bool = True
) -> sqlite3.Connection:
    """Open ``path`` as ``schema``'s database, created or upgraded as needed.

    The connection is in autocommit mode: write with :func:`transaction`. It is not tied
    to the thread that opened it, but is used by one thread at a time (a transaction
    belongs to the connection).

    Args:
        path: the database file; it and its directory are created private if missing.
        schema: the migration list and the damage policy.
        log: told in one line when a damaged cache was started anew.
        repair: start a damaged cache anew (False: refuse it, for an opener that could
            not tell anyone and leaves the repair to one that can).

    Raises:
        StoreError: the file is damaged and ``schema`` (or ``repair``) refuses damaged
            files, or a newer ctx wrote it.
        sqlite3.Error, OSError: it cannot be opened or written (locked too long, no
            permission, a full disk).
    """
    try:
        adopt_former(path, schema)
        make_private(path)
    except PermissionError:
        if schema.read_only_reads and path.is_file():
            return _open_read_only(path, schema)
        former = _former(path, schema)
        if not (schema.read_only_reads and former is not None):
            raise
        return _open_read_only(former, schema)
    try:
        return _open(path, schema)
    except sqlite3.DatabaseError as exc:
        if not _is_damage(exc):
            raise
        if schema.on_damage is OnDamage.REFUSE or not repair:
            raise StoreError(
                f"{path}: the {schema.name} is damaged ({exc}); ctx leaves it as it is: "
                f"move it aside to start a new {schema.name} (sqlite3's .recover can "
                "salvage its rows)"
            ) from exc
        return _rebuild(path, schema, exc, log)


def exists(path: Path, schema: Schema) -> bool:
    """Whether ``schema``'s database is on disk, under its name or a former one."""
    return path.exists() or _former(path, schema) is not None


def adopt_former(path: Path, schema: Schema) -> None:
    """Move the rows of a file under a former name to ``path``, once (no-op otherwise).

    SQLite's backup copies the former file with whatever its write-ahead log still
    holds into a private temporary file, which is renamed to ``path``; only then is the
    former file (and its ``-wal``/``-shm``) removed. One process does it, under the same
    lock as an upgrade; one that waited finds ``path`` there and does nothing.

    Raises:
        sqlite3.Error, OSError: the former file cannot be read or the new one written
            (the former file is then left as it was).
    """
    if path.exists() or _former(path, schema) is None:
        return
    with _file_lock(path):
        former = _former(path, schema)
        if path.exists() or former is None:
            return  # another process adopted it while this one waited
        staged = path.with_name(f".{path.name}.adopting")
        staged.unlink(missing_ok=True)
        make_private(staged)
        with closing(sqlite3.connect(former, timeout=BUSY_TIMEOUT_S)) as src:
            with closing(sqlite3.connect(staged)) as dst:
                src.backup(dst)
        os.replace(staged, path)
        for suffix in (*_SIDECARS, ""):
            Path(f"{former}{suffix}").unlink(missing_ok=True)


def _former(path: Path, schema: Schema) -> Path | None:
    """The first file of ``schema``'s former names beside ``path`` (None: none is there)."""
    for name in schema.former_names:
        candidate = path.with_name(name)
        if candidate.is_file():
            return candidate
    return None


@contextmanager
def opened(path: Path, schema: Schema) -> Iterator[sqlite3.Connection]:
    """:func:`connect` for the length of a ``with`` block, then close."""
    with closing(connect(path, schema)) as db:
        yield db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: take the write lock up front, wait for it.

    Taking it at the start (not at the first write) means a transaction that read
    something never finds, at its first write, that another process wrote in between.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def select_in(
    db: sqlite3.Connection, sql: str, args: Sequence[object], keys: Sequence[object]
) -> Iterator[Any]:
    """The rows of ``sql`` for ``keys``, asked for in batches.

    ``sql`` holds ``{marks}`` where the ``IN (...)`` list goes; ``args`` are the
    parameters before it.
    """
    for start in range(0, len(keys), _BATCH):
        part = keys[start : start + _BATCH]
        marks = ",".join("?" * len(part))
        yield from db.execute(sql.format(marks=marks), (*args, *part))


def _open(path: Path, schema: Schema, *, locked: bool = False) -> sqlite3.Connection:
    """Connect; set the file up first if it is new or older (under :func:`_file_lock`).

    ``locked``: the caller holds that lock already.
    """
    db = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        # Reading the header and the schema is what finds a damaged file, before any
        # pragma below writes to it.
        found = _version(db, path, schema)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        (journal,) = db.execute("PRAGMA journal_mode").fetchone()
        if found < schema.version or journal != "wal":
            # One process at a time: two switching the journal mode at once deadlock,
            # and SQLite fails one of them at once, without waiting ("database is locked").
            with nullcontext() if locked else _file_lock(path):
                db.execute("PRAGMA journal_mode=WAL")
                _migrate(db, path, schema)
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def _open_read_only(path: Path, schema: Schema) -> sqlite3.Connection:
    uri = f"{path.absolute().as_uri()}?mode=ro"
    db = sqlite3.connect(
        uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        _version(db, path, schema)
    except BaseException:
        db.close()
        raise
    return db


def _version(db: sqlite3.Connection, path: Path, schema: Schema) -> int:
    """The file's ``user_version``; a newer ctx's file is refused."""
    (found,) = db.execute("PRAGMA user_version").fetchone()
    if found > schema.version:
        raise StoreError(
            f"{path}: the {schema.name} has version {found}, newer than this ctx knows "
            f"({schema.version}); upgrade ctx, or move the file aside to start a new "
            f"{schema.name}"
        )
    return int(found)


def _migrate(db: sqlite3.Connection, path: Path, schema: Schema) -> None:
    """Run the steps the file lacks, all in one transaction with the version they reach."""
    if _version(db, path, schema) == schema.version:
        return  # another process set it up while this one waited for the lock
    with transaction(db):
        # Read again under the write lock (a ctx without fcntl takes no file lock).
        found = _version(db, path, schema)
        for step in schema.steps[found:]:
            for statement in step:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {schema.version:d}")


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite says the file is not a database or is malformed (not: locked, full)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _rebuild(
    path: Path, schema: Schema, exc: Exception, log: Callable[[str], None] | None
) -> sqlite3.Connection:
    """Start a damaged cache anew, once: other processes that found it wait, then use it."""
    with _file_lock(path):
        try:
            return _open(path, schema, locked=True)  # another process rebuilt it meanwhile
        except sqlite3.DatabaseError as again:
            if not _is_damage(again):
                raise
        # The journal files first: a new database must never adopt the old one's WAL.
        for suffix in (*_SIDECARS, ""):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        make_private(path)
        db = _open(path, schema, locked=True)
    if log is not None:
        log(f"{schema.name} {path} was damaged ({exc}); started a new one")
    return db


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path``, for what one process must do alone.

    That is setting a file up or upgrading it, and starting a damaged one anew. It is a
    lock file (``NAME.lock``, left in place) because the database itself may be replaced;
    the one portable lock of :mod:`ctxcli.services.lock` (fcntl, or msvcrt on Windows).
    """
    with file_lock(Path(f"{path}.lock")):
        yield
