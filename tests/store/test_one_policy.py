"""One policy per product rule (issue 40): every route that answers the same question
gives the same answer."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ctxcli.core.errors import OffloadError
from ctxcli.store.disk import OffloadStore
from ctxcli.store.live import LiveOffload
from ctxcli.store.memory import BlobStore
from ctxcli.store.naming import Preview

# Ids reused with other texts (as real transcripts do), a crafted id that collides with a
# hashed name, an unsafe id, and a lone surrogate (a valid JSON escape with no UTF-8).
PUTS = [
    ("trunc", "call_1", "first text"),
    ("trunc", "call_1", "first text"),
    ("trunc", "call_1", "another text under the same id"),
    ("clear", "call_1", "first text"),
    ("trunc", "../../etc/passwd", "escape attempt"),
    ("trunc", "call_2", "result \ud800 end"),
]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_every_store_names_and_encodes_alike(tmp_path: Path) -> None:
    preview = Preview("R")
    disk = OffloadStore(tmp_path / "disk", "R")
    live = LiveOffload(tmp_path / "live")
    blobs = BlobStore("R", cite="name")
    names: dict[str, list[str]] = {"preview": [], "disk": [], "live": [], "blobs": []}
    for area, key, text in PUTS:
        names["preview"].append(preview.put(area, key, text).removeprefix("R/"))
        names["disk"].append(disk.put(area, key, text).removeprefix("R/"))
        names["live"].append(live.put(area, key, text).removeprefix(live.root + "/"))
        names["blobs"].append(blobs.put(area, key, text).removeprefix("R/"))
    assert names["disk"] == names["preview"] == names["live"] == names["blobs"]
    # The same bytes: valid UTF-8 everywhere (a lone surrogate is U+FFFD).
    for rel, digest in preview.files.items():
        on_disk = (disk.staging / rel).read_bytes()
        live_bytes = (tmp_path / "live" / rel).read_bytes()
        assert _sha(on_disk) == _sha(live_bytes) == digest, rel
        live_bytes.decode("utf-8")
    disk.abort()


@pytest.mark.parametrize("area", ["_x", "é", "Trunc", "a/b", ""])
def test_every_store_refuses_the_same_areas(tmp_path: Path, area: str) -> None:
    for store in (Preview("R"), LiveOffload(tmp_path / "live"), BlobStore("R", cite="name")):
        with pytest.raises(OffloadError, match="invalid offload area"):
            store.put(area, "k", "t")


def test_the_sqlite_stores_take_the_one_portable_lock(tmp_path: Path) -> None:
    """Setting a store up waits for the lock of :mod:`ctxcli.services.lock` (fcntl or
    msvcrt), not an fcntl-only lock of its own: on Windows kv had none."""
    import threading

    from ctxcli.services.kv import connect
    from ctxcli.services.lock import file_lock
    from ctxcli.store.index import SCHEMA

    db = tmp_path / "index.sqlite3"
    opened = threading.Event()

    def open_it() -> None:
        connect(db, SCHEMA).close()
        opened.set()

    with file_lock(Path(f"{db}.lock")) as held:
        assert held.locked
        worker = threading.Thread(target=open_it)
        worker.start()
        assert not opened.wait(1.0)  # the set-up waits for the lock
    assert opened.wait(30)
    worker.join()
