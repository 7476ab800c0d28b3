"""An in-place change that reads its file as a map of a private copy (``InPlace(mapped=True)``).

A reduction in place read the whole session as bytes: 1 GB held before the run began.
Mapped, it holds pages, given back as the run goes; and the map is of a copy no client
can truncate under it (a map of the session itself would die of SIGBUS if one did).
"""

from __future__ import annotations

import mmap
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxcli.api import ChangedError, Destination, reduce, restore_file
from ctxcli.core.io import same_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.sessions import fix_in_place, uncompact
from ctxcli.store.inplace import InPlace, Staged

SAMPLE = Path(__file__).resolve().parents[2] / "sample_transcripts" / "claude_code_session.jsonl"
CHAIN = build_config(
    {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 800}]},
    "test chain",
)
LINES = b'{"a":1}\n{"b":2}\n'
TORN = b'{"c":'


def test_a_mapped_read_is_a_nameless_copy_no_client_can_change(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    path = folder / "s.jsonl"
    path.write_bytes(LINES + TORN)
    with InPlace(path, live_seconds=None, mapped=True) as change:
        assert isinstance(change.raw, mmap.mmap)
        # The copy has no name: nothing appears beside the file.
        assert sorted(p.name for p in folder.iterdir()) == ["s.jsonl"]
        # The client rewrites the file shorter: the read is still what was read.
        path.write_bytes(b"{}\n")
        body = change.body
        assert isinstance(body, mmap.mmap) and body[:] == LINES
        assert change.tail == TORN
        staged = Staged(path)
        staged.open().write(b"{}\n")
        staged.close()
        with pytest.raises(ChangedError, match="its content changed"):
            change.settle(staged)
        staged.discard()
    assert path.read_bytes() == b"{}\n"  # left as the client wrote it
    assert sorted(p.name for p in folder.iterdir()) == ["s.jsonl"]


@pytest.mark.parametrize("content", [b"", b"{}", LINES])
def test_a_mapped_read_of_a_file_with_nothing_to_map(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    with InPlace(path, live_seconds=None, mapped=True) as change:
        assert change.raw[:] == content and bytes(change.body[:]) == content
        assert change.tail == b""
        if content:  # a map: what reads bytes is told so
            with pytest.raises(TypeError, match="as a map"):
                change.raw_bytes  # noqa: B018
        else:
            assert change.raw_bytes == b""
    with InPlace(path, live_seconds=None) as change:
        assert change.raw_bytes == content


@contextmanager
def _never_read_whole(monkeypatch: pytest.MonkeyPatch, path: Path) -> Iterator[None]:
    """Fail if ``path`` is read as bytes meanwhile (a mapped change reads it otherwise)."""
    read = Path.read_bytes

    def spy(self: Path) -> bytes:
        assert self.resolve() != path.resolve(), "the session was read whole"
        return read(self)

    with monkeypatch.context() as m:  # (undo() would drop the suite's data directory too)
        m.setattr(Path, "read_bytes", spy)
        yield


def _session(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "session.jsonl"
    shutil.copyfile(SAMPLE, path)
    return path, path.read_bytes()


def test_a_reduction_in_place_never_reads_the_file_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, original = _session(tmp_path)
    with _never_read_whole(monkeypatch, path):
        done = reduce(path, Destination(in_place=True, stream=True), config=CHAIN)
    assert done.change is not None and done.change.record is not None
    reduced = path.read_bytes()
    assert len(reduced) < len(original)
    # Nothing to change the second time: compared with the map, left as it is.
    again = reduce(path, Destination(in_place=True, stream=True), config=CHAIN)
    assert again.change is not None and again.change.record is None
    assert again.output == b"" and path.read_bytes() == reduced
    assert restore_file(path) == original


def _uncompact(path: Path) -> Path | None:
    return uncompact(path, force=True).record


def _fix(path: Path) -> Path | None:
    return fix_in_place(path, force=True)[1].record


@pytest.mark.parametrize("change", [_uncompact, _fix], ids=["uncompact", "doctor --fix"])
def test_the_other_changes_in_place_never_read_the_file_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], Path | None]
) -> None:
    # The sample holds a compaction and a line its client cannot parse: both change it.
    path, original = _session(tmp_path)
    with _never_read_whole(monkeypatch, path):
        record = change(path)
    assert record is not None and path.read_bytes() != original
    assert restore_file(path) == original


def test_same_bytes_compares_a_map_by_parts(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = bytes(range(256)) * 40_000  # 10 MB: more than one part
    path.write_bytes(data)
    with open(path, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    assert same_bytes(data, m)
    assert not same_bytes(data[:-1] + b"x", m)
    assert not same_bytes(data[:-1], m)
    assert same_bytes(data, data) and not same_bytes(b"a", b"b")
