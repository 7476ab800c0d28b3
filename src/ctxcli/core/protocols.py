"""The restore contract shared by formats, stages and the offload store.

A format writes the reduced transcript unit by unit and records a :class:`RestoreScript`;
the original bytes of every changed or dropped unit go to an :class:`OriginalsSink`.
Stages store removed texts through an :class:`Offload`. The store that implements both
lives in :mod:`ctxcli.store.disk`; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from typing import Any, Protocol

__all__ = [
    "CALL_TAIL",
    "Offload",
    "OriginalsSink",
    "RestoreScript",
    "call_key",
    "encode_text",
    "safe_name",
    "sha256",
    "split_units",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 80


CALL_TAIL = 8
"""Characters of a long tool call id an offload file name keeps (the id's random end)."""
_LONG_ID = 12
"""Call ids longer than this are cut to their tail; shorter ones (``call_1``) stay whole."""


def call_key(call_id: str) -> str:
    """The offload key of a tool call id: the id, or its last :data:`CALL_TAIL` characters.

    A hint naming the file is read from the prompt cache on every later call: a full
    Claude Code id (``toolu_01`` and 22 random characters) costs about 15 tokens where
    its tail costs 5. The tail is as stable as the id (a later request names the same
    file, so a sent prefix never changes) and random enough to be unique in a session;
    a store gives a reused name with another text a name of its own.
    """
    return call_id[-CALL_TAIL:] if len(call_id) > _LONG_ID else call_id


def sha256(data: bytes | memoryview) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def encode_text(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates from JSON escapes survive the trip."""
    return text.encode("utf-8", "surrogatepass")


def safe_name(key: str) -> str:
    """A short file name for ``key`` that cannot escape its directory.

    Ids made only of ``[A-Za-z0-9_.-]`` keep their name; anything else (``../x``,
    ``/etc``, NUL, very long ids) is replaced and suffixed with a hash of the
    original id, so two different ids never share a name.
    """
    name = _UNSAFE.sub("_", key)[:_MAX_NAME].lstrip(".") or "item"
    if name != key:
        name = f"{name}-{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
    return name


def split_units(data: bytes) -> list[bytes]:
    r"""Split JSONL bytes into lines that keep their terminators (``\n`` or ``\r\n``)."""
    # BytesIO shares ``data`` and splits on b"\n" only, copying each line once; split()
    # followed by appending the newline held two copies of the file at the peak.
    return io.BytesIO(data).readlines()


class OriginalsSink(Protocol):
    """Where a format puts the original bytes of the records it changed or dropped."""

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep ``raw`` and return the restore op that inserts it again.

        ``texts`` are texts the record held (its old block texts); a sink that stored
        one of them in a file already may refer to that file instead of keeping its
        bytes twice. Ignoring them is always correct.
        """
        ...


class Offload(OriginalsSink, Protocol):
    """What a stage may do with removed text: store it and get a path to cite."""

    root: str

    def put(self, area: str, key: str, text: str) -> str:
        """Store ``text`` under ``area`` and return the path to show the agent."""
        ...

    def path_for(self, area: str, key: str) -> str:
        """The path ``put(area, key, ...)`` would cite for a new text (for sizing a hint)."""
        ...


class RestoreScript:
    """How to rebuild the original from the reduced output, unit by unit.

    Ops: ``["c", n]`` copy the next n output units, ``["s", n]`` skip n output units
    that are not in the original, ``["b", offset, length, sha256]`` insert original
    bytes from the pack, ``["p", pieces, length, sha256]`` insert an original rebuilt
    from pack bytes and offloaded files (the sink's recipe, see
    ``OffloadStore.add_original``).
    """

    def __init__(self) -> None:
        self.ops: list[list[Any]] = []

    def _run(self, op: str) -> None:
        if self.ops and self.ops[-1][0] == op:
            self.ops[-1][1] += 1
        else:
            self.ops.append([op, 1])

    def copy(self) -> None:
        """The next output unit is an unchanged original unit."""
        self._run("c")

    def skip(self) -> None:
        """The next output unit was made by ctx."""
        self._run("s")

    def original(self, op: list[Any]) -> None:
        """An original unit that is not in the output (changed or dropped)."""
        self.ops.append(op)
