"""The in-memory offload store, content-addressed: dataset rows and record lists use it.

Every removed text and original unit is kept once, under the sha256 of its bytes
(``blobs``), and nothing is written anywhere. A hint cites a text either by its hash
(``<root>/ab/ab12…``: dataset rows, whose blobs go to any object store as they are) or
by the name the disk store would give it (``<root>/trunc/call_1``: reduced records
equal to what ``ctx reduce`` writes, see :func:`~ctxcli.datasets.records.reduce_records`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ctxcli.core.protocols import encode_text, sha256
from ctxcli.store.naming import NamingPolicy

__all__ = ["BlobStore", "blob_path"]


def blob_path(digest: str) -> str:
    """Where the blob with SHA-256 ``digest`` sits under an offload root."""
    return f"{digest[:2]}/{digest}"


class BlobStore(NamingPolicy):
    """An in-memory, content-addressed offload store: identical blobs are kept once.

    Implements the :class:`~ctxcli.core.protocols.Offload` and ``OriginalsSink``
    protocols: stages ``put`` removed texts, formats ``add_original`` the units they
    changed. ``blobs`` maps each SHA-256 to its bytes.

    Args:
        root: the directory or URL the hints cite.
        cite: ``"hash"`` cites :func:`blob_path`; ``"name"`` cites the name the disk
            store gives the text (then :meth:`texts` maps those names to the texts).
    """

    def __init__(self, root: str, *, cite: Literal["hash", "name"] = "hash") -> None:
        super().__init__(root)
        self.cite = cite
        self.blobs: dict[str, bytes] = {}
        self._named: dict[str, str] = {}
        self._texts = 0

    def _keep(self, data: bytes) -> str:
        digest = sha256(data)
        self.blobs.setdefault(digest, data)
        return digest

    def put(self, area: str, key: str, text: str) -> str:
        """Keep ``text`` under its hash and return the path the hint cites."""
        digest = self._keep(encode_text(text))
        self._texts += 1
        if self.cite == "name":
            rel = self._name(area, key, text)
            self._named[rel] = digest
            return self._names.display(rel)
        return self._cite(digest)

    def path_for(self, area: str, key: str) -> str:
        """The path a new text would get; by hash, every path has one length (zeros)."""
        if self.cite == "name":
            return super().path_for(area, key)
        return self._cite("0" * 64)

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep an original unit; the op names it by its hash."""
        data = bytes(raw)
        return ["b", 0, len(data), self._keep(data)]

    def texts(self) -> dict[str, str]:
        """Every text put, by the name it is cited with (``cite="name"``)."""
        return {
            rel: self.blobs[digest].decode("utf-8", "surrogatepass")
            for rel, digest in self._named.items()
        }

    @property
    def count(self) -> int:
        """Files the disk store would write (``cite="name"``), else texts put."""
        return super().count if self.cite == "name" else self._texts

    def _cite(self, digest: str) -> str:
        rel = blob_path(digest)
        return f"{self.root}/{rel}" if self.root != "." else rel
