"""The offload store: every file is there at commit, a failed write is raised (never a
commit missing a file), abort leaves nothing behind."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli.core.protocols import safe_name
from ctxcli.store import manifest as manifest_module
from ctxcli.store.disk import OffloadStore
from ctxcli.store.manifest import Header, InputSide, Side, write_json


def _manifest() -> Header:
    zero = "0" * 64
    return Header.new(
        format="openai_chat",
        units="lines",
        input=InputSide(name="t", sha256=zero, bytes=0),
        output=Side(sha256=zero, bytes=0),
    )


def test_every_file_is_written_by_commit(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "off", "off")
    texts = {f"call_{i}": f"text {i} " * (i % 50 + 1) for i in range(600)}  # > the queue
    for key, text in texts.items():
        store.put("tool", key, text)
    store.commit(_manifest(), [])
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
        store.commit(_manifest(), [])
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


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=9) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON)
def test_a_manifest_written_in_pieces_is_orjsons_bytes(value: object) -> None:
    # Lists of more than two items go out in chunks here, and objects member by member.
    with patch.object(manifest_module, "JSON_CHUNK", 2):
        out = io.BytesIO()
        write_json(out, value)
    assert out.getvalue() == orjson.dumps(value)


def test_a_key_orjson_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        orjson.dumps({1: "a"})
    with pytest.raises(TypeError):
        write_json(io.BytesIO(), {"a": {1: "a"}})


def test_the_manifest_is_never_one_bytes_object(tmp_path: Path) -> None:
    # A re-run's records of a 1 GB session made the manifest 94 MB, held whole twice.
    store = OffloadStore(tmp_path / "off", "off")
    script: list[object] = [["b", i, 100, f"{i:064x}"] for i in range(100_000)]
    size = len(orjson.dumps(script))
    tracemalloc.start()
    try:
        store.commit(_manifest(), script)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    store.finish()
    written = (tmp_path / "off" / "manifest.json").read_bytes()
    assert orjson.loads(written)["script"] == script
    assert peak < size / 4, (peak, size)
