"""Locks between ctx runs, and whether the run that left something behind is gone.

The one lock of ctx: the in-place transaction, the commit of an output with its record,
the cost replay's scratch root and the SQLite stores (:mod:`ctxcli.services.kv`) all take
it. Portable: ``fcntl`` locks on POSIX, ``msvcrt`` locks on Windows, imported when present
(``import ctxcli.api`` must work where ``fcntl`` does not exist). Where neither exists a
lock is not taken: the run goes on as before locks existed, never fails for it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType

from ctxcli.core.protocols import sha256
from ctxcli.services.dirs import data_dir, private_dir

__all__ = ["LOCKS", "Held", "commit_lock", "file_lock", "note_of", "path_lock", "pid_alive"]

LOCKS = "locks"
"""The folder of ctx's data directory holding the lock files of :func:`path_lock`."""


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_FCNTL = _optional("fcntl")  # POSIX
_MSVCRT = _optional("msvcrt")  # Windows


@contextmanager
def commit_lock(*paths: Path) -> Iterator[None]:
    """Hold an exclusive lock on the directories holding ``paths`` while a pair is committed.

    Two runs writing the same output or offload directory would otherwise interleave
    their renames and pair an output with the other run's offload. On POSIX the lock
    is a ``flock`` on the parent directory itself, so no lock file is left behind; a
    directory that cannot be opened is not locked (writing into it fails anyway).
    Elsewhere it is a :func:`path_lock` on the directory.
    """
    dirs = sorted({os.path.realpath(p.parent) for p in paths})
    with ExitStack() as stack:
        for d in dirs:
            if _FCNTL is None:
                stack.enter_context(path_lock(d))
                continue
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            stack.callback(os.close, fd)
            _FCNTL.flock(fd, _FCNTL.LOCK_EX)
        yield


class Held:
    """A lock taken by :func:`path_lock`, and the note its lock file keeps.

    The note is a few bytes the holder may leave for later runs (what ctx wrote last,
    see :mod:`ctxcli.store.inplace`), written under the lock and read by :func:`note_of`.
    """

    def __init__(self, fd: int | None, locked: bool) -> None:
        self.fd = fd
        self.locked = locked

    def write_note(self, data: bytes) -> None:
        """Leave ``data`` for the next holder (best effort: a lock file is never vital)."""
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
            os.write(self.fd, data)
        except OSError:
            pass


def _lock_file(path: str | os.PathLike[str]) -> Path:
    real = os.path.realpath(path)
    return data_dir() / LOCKS / f"{sha256(os.fsencode(real))[:32]}.lock"


def note_of(path: str | os.PathLike[str]) -> bytes:
    """The note the last holder of ``path``'s lock left (empty if none); taken unlocked."""
    try:
        with open(_lock_file(path), "rb") as fh:
            return fh.read(4096)
    except OSError:
        return b""


@contextmanager
def file_lock(lock_file: Path) -> Iterator[Held]:
    """Hold an exclusive lock on ``lock_file`` (created 0600, left in place), waiting for it.

    A lock that cannot be taken (the file cannot be made, a platform without locks) is
    yielded with ``locked`` False: callers go on unlocked, as before locks existed. The
    lock goes when the process ends, however it ends.
    """
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        yield Held(None, False)
        return
    try:
        locked = _lock(fd)
        try:
            yield Held(fd, locked)
        finally:
            if locked:
                _unlock(fd)
    finally:
        os.close(fd)


@contextmanager
def path_lock(path: str | os.PathLike[str]) -> Iterator[Held]:
    """Hold an exclusive lock on ``path`` (resolved) across ctx processes.

    The lock file lives under ctx's data directory, named by a hash of the resolved
    path, so nothing is ever written beside the file locked and a path reached through
    a link locks the file it leads to. A lock that cannot be taken (no data directory,
    a platform without locks) is yielded with ``locked`` False: callers go on unlocked,
    as before locks existed. The lock goes when the process ends, however it ends.
    """
    file = _lock_file(path)
    try:
        private_dir(file.parent)
    except OSError:
        yield Held(None, False)
        return
    with file_lock(file) as held:
        yield held


def _lock(fd: int) -> bool:
    """Wait for an exclusive lock on the open file ``fd``; False if the platform has none."""
    if _FCNTL is not None:
        _FCNTL.flock(fd, _FCNTL.LOCK_EX)
        return True
    if _MSVCRT is not None:
        while True:  # LK_LOCK tries for ten seconds, then raises: wait as flock does
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                _MSVCRT.locking(fd, _MSVCRT.LK_LOCK, 1)
                return True
            except OSError:
                continue
    return False


def _unlock(fd: int) -> None:
    if _FCNTL is not None:
        _FCNTL.flock(fd, _FCNTL.LOCK_UN)
    elif _MSVCRT is not None:
        os.lseek(fd, 0, os.SEEK_SET)
        _MSVCRT.locking(fd, _MSVCRT.LK_UNLCK, 1)


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists (or might: where that cannot be asked safely)."""
    if sys.platform == "win32":
        # os.kill there ends the process instead of probing it: keep a leftover
        # rather than risk that.
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
