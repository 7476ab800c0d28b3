"""An in-memory offload store, content-addressed: what dataset rows and record lists use."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ctxcli.core.protocols import encode_text, sha256
from ctxcli.store.disk import DryRunOffload

__all__ = ["BlobStore", "blob_path"]


def blob_path(digest: str) -> str:
    """Where the blob with SHA-256 ``digest`` sits under an offload root."""
    return f"{digest[:2]}/{digest}"


class BlobStore(DryRunOffload):
    """An in-memory, content-addressed offload store: identical blobs are kept once.

    Implements the :class:`~ctxcli.core.protocols.Offload` and ``OriginalsSink``
    protocols: stages ``put`` removed texts, formats ``add_original`` the units they
    changed. ``blobs`` maps each SHA-256 to its bytes; nothing is written anywhere.
    """

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.blobs: dict[str, bytes] = {}
        self._texts = 0

    def _keep(self, data: bytes) -> str:
        digest = sha256(data)
        self.blobs.setdefault(digest, data)
        return digest

    def put(self, area: str, key: str, text: str) -> str:
        """Keep ``text`` under its hash and return the path the hint cites."""
        digest = self._keep(encode_text(text))
        self._texts += 1
        return self._cite(digest)

    def path_for(self, area: str, key: str) -> str:
        """Every cited path has the same length: a hash of zeros stands in."""
        return self._cite("0" * 64)

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep an original unit; the op names it by its hash."""
        data = bytes(raw)
        return ["b", 0, len(data), self._keep(data)]

    @property
    def count(self) -> int:
        """Texts stages offloaded (the stats' ``offloaded``)."""
        return self._texts

    def _cite(self, digest: str) -> str:
        rel = blob_path(digest)
        return f"{self.root}/{rel}" if self.root != "." else rel
