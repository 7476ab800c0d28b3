"""Where ctx reads: a transcript's bytes (in memory, or a map given back as read), and locations.

A location is a local path or a URL; :func:`local_path` is the one rule for which URLs
name local files, for every layer that opens one (the file API, object storage, the
live offload of the in-process reducer). :func:`parse_toml` reads every TOML file ctx
reads (configs, the price table) with one error rule.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import tomllib
from typing import TYPE_CHECKING, Any, BinaryIO

from ctxcli.core.errors import ConfigError

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

__all__ = [
    "FAULT_AROUND",
    "Input",
    "Made",
    "Pages",
    "RELEASE_BYTES",
    "hash_input",
    "is_url",
    "local_path",
    "parse_toml",
    "release",
    "same_bytes",
]

Input = bytes | mmap.mmap
"""A transcript's bytes: in memory, or a read-only map of its file (``api.open_input``).

Slicing either gives ``bytes``; record views (``Record.raw``) point into either. A map's
pages can be given back once read (:func:`release`): they re-fault from the page cache.
"""

RELEASE_BYTES = 4 << 20
"""How much of a mapped input is read between two :func:`release` calls."""
FAULT_AROUND = 64 << 10
"""What one read of a map may make resident: the kernel maps up to 64 KB around a fault."""


def release(raw: Input, end: int | None = None) -> None:
    """Give back the resident pages of a mapped input (up to ``end``); bytes are kept.

    ``MADV_DONTNEED`` on a read-only file map only unmaps the pages: the next read of
    them faults them in again from the page cache, so nothing is lost.
    """
    dontneed = getattr(mmap, "MADV_DONTNEED", None)  # not on Windows: pages stay
    if isinstance(raw, mmap.mmap) and len(raw) and dontneed is not None:
        length = len(raw) if end is None else end - end % mmap.PAGESIZE
        if length > 0:
            raw.madvise(dontneed, 0, length)


def hash_input(h: Hash, raw: Input, start: int = 0, end: int | None = None) -> Hash:
    """``h`` updated with ``raw[start:end]``; a map's pages are given back as it goes.

    Hashing a 1 GB map in one call leaves all of it resident.
    """
    view = memoryview(raw)
    end = len(raw) if end is None else end
    if not isinstance(raw, mmap.mmap):
        h.update(view[start:end])
        return h
    for pos in range(start, end, RELEASE_BYTES):
        h.update(view[pos : min(pos + RELEASE_BYTES, end)])
        release(raw, min(pos + RELEASE_BYTES, end))
    return h


def same_bytes(made: bytes, raw: Input) -> bool:
    """Whether ``raw`` holds ``made``'s bytes; a map's pages are given back as it is read."""
    if len(made) != len(raw):
        return False
    if not isinstance(raw, mmap.mmap):
        return made == raw
    for pos in range(0, len(made), RELEASE_BYTES):
        end = min(pos + RELEASE_BYTES, len(made))
        if raw[pos:end] != made[pos:end]:  # copies of 4 MB: memcmp, not a view's compare
            return False
        release(raw, end)
    return True


class Pages:
    """Gives a mapped input's pages back as a pass over it goes, every :data:`RELEASE_BYTES`.

    :meth:`reached` is for a pass that moves forward (the pages before it go), :meth:`read`
    for reads anywhere in the input (all pages go). On bytes, neither does anything.
    """

    __slots__ = ("raw", "_at", "_read")

    def __init__(self, raw: Input) -> None:
        self.raw = raw if isinstance(raw, mmap.mmap) else None
        self._at = self._read = 0

    def reached(self, pos: int) -> None:
        """The pass is at ``pos``."""
        if self.raw is not None and pos - self._at >= RELEASE_BYTES:
            release(self.raw, pos)
            self._at = pos

    def read(self, n: int) -> None:
        """``n`` more bytes of the input were read."""
        if self.raw is not None:
            # A read faults in up to FAULT_AROUND of its neighbours: short reads (a
            # 2 KB text) kept 60 MB of a 100 MB map resident between releases.
            self._read += max(n, FAULT_AROUND)
            if self._read >= RELEASE_BYTES:
                release(self.raw)
                self._read = 0


_LOCAL_SCHEMES = ("file://", "local://")


class Made:
    """An output as it is made: written to a file as it goes, or kept; hashed and sized.

    A change written to ``into`` (a transaction's staged output) is never held whole.
    """

    def __init__(self, into: BinaryIO | None) -> None:
        self.into = into
        self.parts: list[bytes | memoryview] = []
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        """Add ``data`` to the output."""
        self.hash.update(data)
        self.size += len(data)
        if self.into is not None:
            self.into.write(data)
        else:
            self.parts.append(data)

    def bytes(self) -> bytes:
        """The output kept (empty when it was written to a file)."""
        return b"".join(self.parts)


def is_url(location: str | os.PathLike[str] | None) -> bool:
    """True for ``scheme://...``: object storage, or a local file named as a URL.

    A URL that names a local file (``file://``) has a :func:`local_path`: take it before
    comparing locations or writing, so that the URL and the path are one file.
    """
    return location is not None and "://" in os.fspath(location)


def local_path(location: str | os.PathLike[str]) -> str | None:
    """The local path ``location`` names, or None for object storage (``s3://`` ...).

    A plain path is itself; ``file://`` and fsspec's ``local://`` URLs are their path,
    read as fsspec reads them (``file:///abs/in.jsonl`` is ``/abs/in.jsonl``, nothing
    is percent-decoded).
    """
    text = os.fspath(location)
    for scheme in _LOCAL_SCHEMES:
        if text.startswith(scheme):
            return text[len(scheme) :]
    return None if is_url(text) else text


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """Parse ``text`` as TOML; ``where`` names the file in the error (every TOML file ctx reads).

    Raises:
        ConfigError: invalid TOML, or arrays and tables nested too deeply for the parser
            (it recurses once per level: ~500 levels exhaust Python's stack).
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}.") from None
    except RecursionError:
        raise ConfigError(
            f"{where}: invalid TOML: arrays or tables nested too deeply to read; flatten the value."
        ) from None
