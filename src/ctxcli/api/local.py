"""Files as the library reads and names them: inputs, mapped or read, and default paths."""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import sys
from pathlib import Path

from ctxcli.core.errors import OffloadError
from ctxcli.core.io import Input, hash_input
from ctxcli.core.protocols import sha256
from ctxcli.store.inplace import unreadable

__all__ = [
    "MAP_MIN_BYTES",
    "STDIO",
    "changed_since",
    "check_output",
    "cited_root",
    "digest",
    "offload_path",
    "open_input",
    "per_input_dirs",
    "read_input",
]

STDIO = "-"


def per_input_dirs(root: Path) -> list[Path]:
    """The per-input offload directories under a root (what output to stdout writes)."""
    try:
        return sorted(p.parent for p in root.glob("*/manifest.json"))
    except OSError:
        return []


def read_input(path: str) -> bytes:
    """The bytes of ``path`` (``-`` reads stdin)."""
    if path == STDIO:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise unreadable(path, exc) from None


MAP_MIN_BYTES = 1 << 20
"""Inputs from this size on are mapped, not read (:func:`open_input`)."""


def open_input(path: str) -> tuple[Input, os.stat_result | None]:
    """The bytes of ``path``, and the file's status when they are a map of it.

    A regular file of :data:`MAP_MIN_BYTES` or more is mapped read-only instead of read:
    its pages are given back once parsed (:func:`~ctxcli.core.io.release`), so a
    run does not hold the input and its parsed records at once. Check the returned
    status with :func:`changed_since` after using the result: a map shows what is in
    the file now, not a snapshot. (A file truncated under the map kills the process
    with SIGBUS: in-place and session runs, whose file a client may rewrite, read bytes.)
    """
    if path == STDIO:
        return read_input(path), None
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size >= max(MAP_MIN_BYTES, 1):
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), st
            return fh.read(), None  # a pipe is read once, from this open
    except OSError as exc:
        raise unreadable(path, exc) from None


def digest(data: Input) -> str:
    """Hex SHA-256 of ``data``; a map is read in steps, its pages given back as it goes."""
    if isinstance(data, bytes):
        return sha256(data)
    return hash_input(hashlib.sha256(), data, 0, len(data)).hexdigest()


def changed_since(path: str, st: os.stat_result | None) -> bool:
    """True if the mapped file ``path`` is not as it was when mapped (``st``)."""
    if st is None:
        return False
    try:
        now = os.stat(path)
    except OSError:
        return True
    return (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns)


def offload_path(root: str) -> tuple[Path, str]:
    """The offload directory to write and how hints cite it (:func:`cited_root`)."""
    path = Path(root)
    if ".." in path.parts or path.name in ("", "."):
        return Path(os.path.realpath(os.path.normpath(root))), cited_root(root)
    return path, cited_root(root)


def cited_root(root: str) -> str:
    """How hints cite a local offload directory: by its absolute path (``w/sub/..`` is ``w``).

    The agent that reads a reduced transcript rarely runs where ``ctx reduce`` ran (a
    resumed session, another checkout): a path relative to ctx's working directory would
    point nowhere for it.
    """
    return os.path.abspath(root)


def check_output(input_name: str, out_name: str | None, in_place: bool) -> str | None:
    """The output path, after refusing combinations that would lose the input."""
    if in_place:
        if input_name == STDIO:
            raise OffloadError("an in-place reduction needs a file, not stdin.")
        if out_name not in (None, STDIO, input_name):
            raise OffloadError(
                "an in-place reduction writes to its input; do not give an output path too."
            )
        return input_name
    if out_name not in (None, STDIO) and Path(str(out_name)).is_dir():
        raise OffloadError(f"{out_name} is a directory: name a file to write the output to.")
    if out_name not in (None, STDIO) and input_name != STDIO:
        if Path(str(out_name)).resolve() == Path(input_name).resolve():
            raise OffloadError(
                f"{out_name}: output would overwrite the input; choose another output "
                "(the input is never modified)."
            )
    return out_name
