"""How removed texts are named: the one naming policy every store shares.

A text goes to ``<root>/<area>/<safe id>`` (``trunc/call_1``, ``clear/call_7``): the Eino
layout the stages cite. Identical texts under one id share a file; another text under
an id already taken gets a content-hash suffix, so a transcript that reuses call ids
never overwrites one text with another. :class:`NamingPolicy` applies the policy; the
disk and memory stores are kinds of it, and so is :class:`Preview`, which writes nothing
(``ctx stats`` runs the same pipeline with it, so its numbers and hints are the ones the
real run makes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ctxcli.core.errors import OffloadError
from ctxcli.core.protocols import safe_name, sha256

__all__ = ["NamingPolicy", "Preview", "agent_text", "check_area", "name_candidates"]


def agent_text(text: str) -> bytes:
    r"""The UTF-8 bytes of an offloaded text for the agent to read.

    A lone surrogate (a valid ``\ud800`` escape in JSON) has no UTF-8 form: it
    becomes U+FFFD so strict readers can open the file. The restore pack keeps the
    exact original bytes, so nothing is lost.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a stray surrogate becomes one U+FFFD, a split pair its character.
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed.encode("utf-8")


_AREA = re.compile(r"[a-z][a-z0-9_]*")


def check_area(area: str) -> None:
    """Refuse an area name that is not a plain lowercase word (it becomes a directory).

    Raises:
        OffloadError: naming the area.
    """
    if not _AREA.fullmatch(area):
        raise OffloadError(f"invalid offload area {area!r}")


def name_candidates(key: str, digest: str) -> Iterator[str]:
    """The names a text with sha256 ``digest`` may take under ``key``, in order.

    The safe form of the id first; if another text holds it (real transcripts reuse call
    ids), the id with a hash of the text; if even that is held (a crafted id), counted.
    """
    base = safe_name(key)
    yield base
    hashed = f"{base}-{digest[:10]}"
    yield hashed
    n = 2
    while True:
        yield f"{hashed}-{n}"
        n += 1


@dataclass
class _Names:
    """Assigns collision-free names per area; identical texts share one file."""

    root: str
    taken: dict[tuple[str, str], str] = field(default_factory=dict)
    count: int = 0

    def assign(self, area: str, key: str, digest: str) -> tuple[str, bool]:
        check_area(area)
        for name in name_candidates(key, digest):
            held = self.taken.get((area, name))
            if held == digest:
                return f"{area}/{name}", False
            if held is None:
                break
        self.taken[(area, name)] = digest
        self.count += 1
        return f"{area}/{name}", True

    def display(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root else rel


class NamingPolicy:
    """Name removed texts as every store does; write nothing (the stores add the writing).

    ``files`` maps every name given out (``trunc/call_1``) to the sha256 of the bytes
    the disk store would write there.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "."
        self._names = _Names(self.root)
        self.files: dict[str, str] = {}

    def put(self, area: str, key: str, text: str) -> str:
        """Name ``text`` as the disk store would; return the path a hint cites."""
        return self._names.display(self._name(area, key, text))

    def _name(self, area: str, key: str, text: str) -> str:
        """The name ``text`` gets under ``area`` (relative to the root), recorded in ``files``."""
        digest = sha256(agent_text(text))
        rel, _new = self._names.assign(area, key, digest)
        self.files[rel] = digest
        return rel

    def path_for(self, area: str, key: str) -> str:
        """The path a new text put under ``key`` would get (for sizing a hint)."""
        return self._names.display(f"{area}/{safe_name(key)}")

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep nothing: return an op of the real shape with an empty hash."""
        return ["b", 0, len(raw), ""]

    @property
    def count(self) -> int:
        """Number of distinct files that would be written."""
        return self._names.count


class Preview(NamingPolicy):
    """Name files exactly like the real store but write nothing (``ctx stats``)."""
