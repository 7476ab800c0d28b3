"""Change a file where its reader reads it: one transaction for reduce, repair and restore.

A file changed in place (``ctx reduce --in-place``, ``ctx doctor --fix``, ``ctx restore
--in-place``) may belong to a client that is still writing it: Claude Code appends a line
per event. :class:`InPlace` makes such a change safe against the client and against other
ctx runs:

1. An exclusive lock per file (:func:`~ctxcli.services.lock.path_lock`, under ctx's data
   directory, keyed by the resolved path) is held from the read to the rename: two ctx
   runs on one file take turns, and never number their change alike.
2. The file is read once. A read that ends inside a line (a client writing it) is changed
   only up to its last newline; the rest is carried over like an appended line.
3. The change is recorded (its directory committed) before the file is replaced, so a kill
   at any moment leaves the old file, or the new one with its record.
4. Just before the rename the file is compared with what was read (:meth:`InPlace.settle`):
   if it only grew, the new bytes are carried over after the output (restore carries them
   back the same way); if it changed otherwise, the run fails and the file is left alone.

Not protected: a write landing between that comparison and the rename (microseconds: no
lock the clients honour exists), and a writer that keeps the file open and writes after
the rename (its bytes go to the old file). A file written in the last ``live_seconds``
or open in another process is refused unless forced (:func:`liveness`), except when ctx
itself wrote it last (the lock file keeps a note of that).
"""

from __future__ import annotations

import mmap
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from ctxcli.core.errors import CtxError, Remedy, TranscriptError
from ctxcli.core.io import Input, release
from ctxcli.services.lock import Held, note_of, path_lock
from ctxcli.services.session_files import update_index
from ctxcli.store.disk import fsync_dir, remove_stale

__all__ = [
    "DEFAULT_LIVE_SECONDS",
    "Change",
    "ChangedError",
    "InPlace",
    "LiveSessionError",
    "Staged",
    "liveness",
    "unreadable",
    "write_atomic",
]

DEFAULT_LIVE_SECONDS = 60
_CHUNK = 1 << 20


class LiveSessionError(CtxError):
    """The file looks in use by its client; changing it now could lose its writes."""


class ChangedError(CtxError):
    """The file changed during the run other than by appending; it was left as it was."""


@dataclass(frozen=True)
class Change:
    """What an in-place change did.

    ``record`` is the directory that undoes it (None: nothing was changed or recorded);
    ``carried_bytes`` were after what was changed (appended during the run, or a line
    being written when it was read) and are kept as they were after the output.
    """

    path: Path
    record: Path | None
    bytes_before: int
    bytes_after: int
    carried_bytes: int = 0


class Staged:
    """A temporary file beside ``path`` that becomes ``path`` by one rename, or goes.

    Its name is chosen before the file exists and :meth:`discard` removes whatever of it
    exists, so an interrupt at any moment, inside the ``open`` too, leaves nothing behind.
    ``mode`` is given to the file (an in-place change keeps the original's).
    """

    def __init__(self, path: Path, mode: int | None = None) -> None:
        self.path = path
        self.tmp = path.parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
        self.mode = mode
        self.fh: BinaryIO | None = None

    def open(self) -> BinaryIO:
        """Create the temporary file (sweeping those of runs that are gone) and open it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale(self.path.parent, self.path.name, "tmp")
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            self.fh = os.fdopen(fd, "wb")
            if self.mode is not None:
                os.fchmod(self.fh.fileno(), self.mode)
        except OSError as exc:
            self._name(exc)
            raise
        return self.fh

    def close(self) -> None:
        """Flush the file to disk and close it (before the rename or a carry)."""
        if self.fh is None:
            return
        fh, self.fh = self.fh, None
        with fh:
            fh.flush()
            os.fsync(fh.fileno())

    def replace(self) -> None:
        """Rename the file into place."""
        self.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        """Remove the temporary file, whatever state it is in."""
        fh, self.fh = self.fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass
        self.tmp.unlink(missing_ok=True)

    def _name(self, exc: BaseException) -> None:
        """An error about the temporary file names the file the user asked for."""
        if isinstance(exc, OSError) and exc.filename in (None, str(self.tmp)):
            exc.filename = str(self.path)


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    staged = Staged(path, mode)
    try:
        staged.open().write(data)
        staged.replace()
    except BaseException as exc:
        staged.discard()
        staged._name(exc)
        raise


class InPlace:
    """One in-place change of a file: lock, read, (change), settle, replace.

    Use it as a context manager: entering takes the file's lock, reads it and checks
    that it is not in use (``live_seconds`` None skips that check); leaving releases
    the lock. Between, :attr:`body` is what to change, :meth:`stage` a file for the new
    bytes, :meth:`settle` carries over what arrived since the read, :meth:`replace`
    puts the staged file in place. ``lines``: a read that ends inside a line is changed
    up to its last newline only (never for a repair, whose job is a torn last line).
    ``raw``: the bytes already read (the caller read them under no lock: they are
    compared with the file like any read). ``mapped``: what is read is a map of a
    private copy of the file, not bytes in memory (:meth:`_private_copy`), for a change
    that reads its input as a map (a reduction).
    """

    def __init__(
        self,
        path: Path,
        *,
        live_seconds: int | None = DEFAULT_LIVE_SECONDS,
        lines: bool = True,
        raw: bytes | None = None,
        mapped: bool = False,
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self.target = Path(os.path.realpath(path))
        """The file written: a link is written through, to the file it names."""
        self.live_seconds = live_seconds
        self.lines = lines
        self.document = False
        self.raw: Input = raw if raw is not None else b""
        self._given = raw is not None
        self.mapped = mapped and raw is None
        self._copy: BinaryIO | None = None
        self._body: Input | None = None
        self.end = 0
        self.mode = 0o644
        self._stack = ExitStack()
        self._held = Held(None, False)

    def __enter__(self) -> InPlace:
        try:
            self._held = self._stack.enter_context(path_lock(self.target))
            self._read()
            self.check_live(self.live_seconds)
            remove_stale(self.target.parent, None, "tmp")
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def check_live(self, seconds: int | None) -> None:
        """Refuse a file that looks in use (see :func:`liveness`); None checks nothing.

        Raises:
            LiveSessionError: naming why it looks in use.
        """
        why = None if seconds is None else liveness(self.target, seconds)
        if why is not None:
            raise LiveSessionError(
                f"{self.path}: the session looks in use ({why})", remedy=Remedy.FORCE_IN_USE
            )

    def _read(self) -> None:
        try:
            st = os.stat(self.target)
            if not self._given:
                self.raw = self._private_copy() if self.mapped else self.target.read_bytes()
        except OSError as exc:
            raise unreadable(str(self.path), exc) from None
        self.mode = stat.S_IMODE(st.st_mode)
        self.end = complete_lines(self.raw) if self.lines else len(self.raw)

    def _private_copy(self) -> Input:
        """The file as read, mapped from a copy that only this change holds.

        A 1 GB session read as bytes is 1 GB held; a map of the file itself would kill
        ctx (SIGBUS) if its client truncated it meanwhile. The copy has no name (it goes
        when the change ends, crash or not) and sits beside the file, on its disk, not
        in a memory-backed /tmp. Where it cannot be made (a full disk), the bytes are
        read instead.
        """
        try:
            copy = tempfile.TemporaryFile(dir=self.target.parent, prefix=".ctx-read-")
        except OSError:
            return self.target.read_bytes()
        self._stack.callback(copy.close)  # the maps keep what they map
        try:
            with open(self.target, "rb") as source:
                shutil.copyfileobj(source, copy, _CHUNK)
            copy.flush()
        except OSError as exc:
            if exc.filename is not None:  # the file itself: reading it fails the same
                raise
            return self.target.read_bytes()
        if not copy.tell():
            return b""
        self._copy = copy
        return mmap.mmap(copy.fileno(), 0, access=mmap.ACCESS_READ)

    @property
    def raw_bytes(self) -> bytes:
        """What was read, as bytes: the read of a change made without ``mapped``."""
        if not isinstance(self.raw, bytes):
            raise TypeError("this change read its file as a map")
        return self.raw

    @property
    def tail(self) -> bytes:
        """What was read after :attr:`body`: the start of a line being written."""
        return self.raw[self.end :]

    def whole(self) -> None:
        """Change the file as one document: nothing after it is carried over.

        A document (one JSON value) has no lines a client appends: bytes after it are
        part of it, and a file that grows during the run is changed, not appended to.
        """
        self.document = True
        self.end = len(self.raw)

    @property
    def body(self) -> Input:
        """What the change is made to: the bytes read, up to the last complete line."""
        if self.end == len(self.raw):
            return self.raw
        if self._copy is None or not self.end:
            return self.raw[: self.end]
        if self._body is None or len(self._body) != self.end:
            # A map of the copy's complete lines: slicing the map would copy them.
            self._body = mmap.mmap(self._copy.fileno(), self.end, access=mmap.ACCESS_READ)
        return self._body

    def stage(self) -> Staged:
        """A temporary file for the new bytes, beside the file, with its mode."""
        return Staged(self.target, self.mode)

    def settle(self, staged: Staged) -> int:
        """Carry what follows the changed part over to ``staged``; its size.

        That is the rest of a line being written when the file was read, and whatever
        was appended since. Call it after the change is recorded and right before
        :meth:`replace`, with ``staged`` closed.

        Raises:
            ChangedError: the file changed otherwise (or grew where a carried tail
                would not be a line of its own); it must be left as it is.
        """
        extra = self._appended()
        tail = self.raw[self.end :] + extra
        if not tail:
            return 0
        if self.document:
            raise self._changed("a document takes no lines appended")
        output_ends_line = _last_byte(staged.tmp) in (b"", b"\n")
        read_ends_line = self.end == 0 or self.raw[self.end - 1 : self.end] == b"\n"
        if not (output_ends_line and read_ends_line):
            raise self._changed("it grew while its last line was being changed")
        with open(staged.tmp, "ab") as fh:
            fh.write(tail)
            fh.flush()
            os.fsync(fh.fileno())
        return len(tail)

    def _appended(self) -> bytes:
        """The bytes after what was read, if the file still starts with what was read."""
        try:
            with open(self.target, "rb") as fh:
                view = memoryview(self.raw)
                for start in range(0, len(view), _CHUNK):
                    piece = view[start : start + _CHUNK]
                    if fh.read(len(piece)) != piece:
                        raise self._changed("its content changed")
                    if start % (64 * _CHUNK) == 0:
                        release(self.raw, start)  # a map's compared pages go back
                release(self.raw)
                return fh.read()
        except OSError as exc:
            raise self._changed(f"it cannot be read again ({exc.strerror})") from None

    def _changed(self, why: str) -> ChangedError:
        return ChangedError(
            f"{self.path} changed while ctx changed it ({why}, not only by lines appended); "
            "it was left as it was: run again once its client is done with it"
        )

    def replace(self, staged: Staged) -> None:
        """Put ``staged`` in place of the file, durably, and note that ctx wrote it."""
        staged.replace()
        fsync_dir(self.target.parent)
        st = os.stat(self.target)
        self._held.write_note(orjson.dumps([st.st_ino, st.st_size, st.st_mtime_ns]))
        update_index(self.path, _keeping_mode)


def _keeping_mode(path: Path, data: bytes) -> None:
    """Write ``data`` over ``path`` atomically, keeping the file's mode.

    A client's index is as private as the sessions it lists.
    """
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    write_atomic(path, data, mode=mode)


def unreadable(path: str, exc: OSError) -> TranscriptError:
    """The error for a transcript file that cannot be read, naming why in a few words."""
    if isinstance(exc, FileNotFoundError):
        return TranscriptError(path, None, "no such file")
    if isinstance(exc, IsADirectoryError):
        return TranscriptError(path, None, "is a directory; pass a transcript file")
    return TranscriptError(path, None, f"cannot read ({exc.strerror})")


def complete_lines(raw: Input) -> int:
    """Where the last complete line of ``raw`` ends, if it is JSON lines; else its length.

    A file whose first line is not JSON by itself is one document (or damaged): its end
    is never cut.
    """
    end = raw.rfind(b"\n") + 1
    if end in (0, len(raw)):
        return len(raw)
    try:
        orjson.loads(raw[: raw.find(b"\n")])
    except orjson.JSONDecodeError:
        return len(raw)
    return end


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        fh.seek(size - 1)
        return fh.read(1)


def liveness(path: Path, seconds: int = DEFAULT_LIVE_SECONDS) -> str | None:
    """Why the file looks in use (recently written, or open in a process), or None.

    A file ctx itself wrote last (a reduce, a repair or a restore in place, noted in its
    lock file) is not in use for being recent: a repair followed by a reduction is fine.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    age = time.time() - st.st_mtime
    if age < seconds and not _written_by_ctx(path, st):
        return f"it was modified {max(age, 0):.0f}s ago, less than {seconds}s"
    pid = _opened_by(path)
    if pid is not None:
        return f"process {pid} has it open"
    return None


def _written_by_ctx(path: Path, st: os.stat_result) -> bool:
    try:
        noted = orjson.loads(note_of(path))
    except orjson.JSONDecodeError:
        return False
    return bool(noted == [st.st_ino, st.st_size, st.st_mtime_ns])


def _opened_by(path: Path) -> int | None:
    """A process other than this one holding ``path`` open (Linux ``/proc``)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = os.path.realpath(path)
    me = os.getpid()
    for entry in _processes(proc):
        if int(entry.name) == me:
            continue
        try:
            for fd in (entry / "fd").iterdir():
                try:
                    if os.readlink(fd) == target:
                        return int(entry.name)
                except OSError:
                    continue
        except OSError:
            continue
    return None


def _processes(proc: Path) -> Iterator[Path]:
    try:
        yield from (entry for entry in proc.iterdir() if entry.name.isdigit())
    except OSError:
        return
