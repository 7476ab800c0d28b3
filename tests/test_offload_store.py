"""The offload store: every file is there at commit, a failed write is raised (never a
commit missing a file), abort leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.core.restore import safe_name
from ctxcli.pipeline.offload import OffloadStore


def _manifest() -> dict[str, object]:
    return {"input": {"sha256": "0" * 64}}


def test_every_file_is_written_by_commit(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "off", "off")
    texts = {f"call_{i}": f"text {i} " * (i % 50 + 1) for i in range(600)}  # > the queue
    for key, text in texts.items():
        store.put("tool", key, text)
    store.commit(_manifest())
    store.finish()
    for key, text in texts.items():
        assert (tmp_path / "off" / "tool" / safe_name(key)).read_text() == text


def test_a_failed_write_is_raised_and_nothing_is_committed(tmp_path: Path) -> None:
    base = tmp_path / "t"
    base.mkdir()
    store = OffloadStore(base / "off", "off")
    # A file already holding the first name: the O_EXCL open on the thread fails.
    (store.staging / "tool").mkdir()
    (store.staging / "tool" / safe_name("call_0")).write_text("in the way")
    with pytest.raises(FileExistsError):
        for i in range(50):
            store.put("tool", f"call_{i}", f"text {i}")
        store.commit(_manifest())
    store.abort()
    assert list(base.iterdir()) == []


def test_abort_waits_for_the_writer_and_leaves_nothing(tmp_path: Path) -> None:
    base = tmp_path / "t"
    base.mkdir()
    store = OffloadStore(base / "sub" / "off", "off")
    for i in range(300):
        store.put("tool", f"call_{i}", "x" * 1000)
    store.abort()
    assert list(base.iterdir()) == []
