"""Inputs read through a map (api.open_input): the same output, report and restore as a read.

Large regular files are mapped instead of read, and their pages are given back once
parsed, packed or copied (issue 22). Mapping must change nothing a user can see: these
tests map every input (``MAP_MIN_BYTES = 0``) and compare with the bytes path.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from support.bench.gen_transcript import generate

from ctxcli import api
from ctxcli.api import commit, local
from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import FAULT_AROUND, RELEASE_BYTES, Pages, release
from ctxcli.core.protocols import sha256
from ctxcli.pipeline import compose as reducer
from ctxcli.pipeline.config import build_config, default_config
from support.paths import corpus, shared_transcripts

TIGHT = build_config(
    {
        "stages": [
            {"use": "truncate_tool_output", "max_chars": 2000},
            {"use": "clear_tool_results", "max_tokens": 20000},
        ]
    },
    "mapped input",
)


@pytest.fixture
def mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Map every regular file, however small."""
    monkeypatch.setattr(local, "MAP_MIN_BYTES", 0)


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    path.write_bytes(generate(600_000, seed=3))
    return path


def _manifest(out: Path) -> dict[str, object]:
    manifest = json.loads(Path(f"{out}.offload/manifest.json").read_bytes())
    return {k: manifest[k] for k in ("input", "output", "script", "files")}


def test_open_input_maps_regular_files_only(tmp_path: Path, mapped: None) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n')
    data, st = api.open_input(str(path))
    assert isinstance(data, mmap.mmap) and st is not None
    assert data[:] == path.read_bytes()
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert api.open_input(str(empty)) == (b"", None)  # an empty file cannot be mapped
    with pytest.raises(TranscriptError, match="no such file"):
        api.open_input(str(tmp_path / "missing.jsonl"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(path.read_bytes()))
    writer.start()
    try:
        assert api.open_input(str(fifo)) == (path.read_bytes(), None)
    finally:
        writer.join(timeout=10)


def test_released_pages_still_read_the_same(synthetic: Path, mapped: None) -> None:
    data, _ = api.open_input(str(synthetic))
    assert isinstance(data, mmap.mmap)
    before = data[:]
    release(data, 8192)
    release(data)
    assert data[:] == before
    assert local.digest(data) == sha256(before)


def _resident_kb(path: Path) -> int:
    """Resident KB of this process's map of ``path`` (/proc/self/smaps)."""
    found, kb = False, 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isalnum() and "-" in line.split(" ", 1)[0]:  # a mapping's header
            found = line.rstrip().endswith(str(path))
        elif found and line.startswith("Rss:"):
            kb += int(line.split()[1])
    return kb


@pytest.mark.may_skip(reason="a platform property")
@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's smaps")
def test_pages_go_back_as_a_pass_goes(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(3 * RELEASE_BYTES))
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        size_kb = len(data) // 1024

        def touch() -> None:
            assert sum(data[i] for i in range(0, len(data), mmap.PAGESIZE)) >= 0

        touch()
        assert _resident_kb(path) >= size_kb * 0.9
        pages = Pages(data)
        pages.reached(RELEASE_BYTES - 1)  # less than 4 MB passed: nothing goes yet
        assert _resident_kb(path) >= size_kb * 0.9
        pages.reached(2 * RELEASE_BYTES)  # the first 8 MB go, the last 4 MB stay
        assert size_kb // 3 * 0.9 <= _resident_kb(path) <= size_kb // 3 + 64
        touch()
        pages.read(RELEASE_BYTES // 2)
        assert _resident_kb(path) >= size_kb * 0.9
        pages.read(RELEASE_BYTES // 2)  # 4 MB read anywhere: every page goes
        assert _resident_kb(path) <= 64
        assert Pages(b"bytes").raw is None  # bytes: nothing to give back


@pytest.mark.may_skip(reason="a platform property")
@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's smaps")
def test_short_reads_anywhere_count_the_pages_they_fault_in(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(3 * RELEASE_BYTES))
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        pages = Pages(data)
        most = 0
        # One byte every 64 KB, as reading short texts spread over a file does: each
        # read may bring its 64 KB neighbourhood in, and 4 MB of that is the most kept.
        for at in range(0, len(data), FAULT_AROUND):
            assert data[at : at + 1]
            pages.read(1)
            most = max(most, _resident_kb(path))
        assert most <= (RELEASE_BYTES + FAULT_AROUND) // 1024, most


def _reduce_both(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: object
) -> tuple[bytes, bytes]:
    """The output read and mapped, both written to ``tmp_path/out.jsonl`` (hints cite it)."""
    out = tmp_path / "out.jsonl"
    monkeypatch.setattr(local, "MAP_MIN_BYTES", 1 << 60)
    _, read = api.reduce_file(path, out, **kw)  # type: ignore[arg-type]
    manifest = _manifest(out)
    shutil.rmtree(f"{out}.offload")
    out.unlink()
    monkeypatch.setattr(local, "MAP_MIN_BYTES", 0)
    _, mapped = api.reduce_file(path, out, **kw)  # type: ignore[arg-type]
    assert _manifest(out) == manifest
    assert out.read_bytes() == mapped
    return read, mapped


def test_synthetic_reduce_is_the_same_mapped(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, mapped = _reduce_both(synthetic, tmp_path, monkeypatch, config=TIGHT)
    assert mapped == read and len(read) < synthetic.stat().st_size
    assert api.restore_file(tmp_path / "out.jsonl") == synthetic.read_bytes()


def test_stats_are_the_same_mapped(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ctxcli.services.tokens.ledger import CountOptions

    counting = CountOptions(cache=False)
    monkeypatch.setattr(local, "MAP_MIN_BYTES", 1 << 60)
    read = api.stats_file(
        synthetic, config=TIGHT, options=api.RunOptions(counting=counting)
    ).to_dict()
    monkeypatch.setattr(local, "MAP_MIN_BYTES", 0)
    mapped = api.stats_file(
        synthetic, config=TIGHT, options=api.RunOptions(counting=counting)
    ).to_dict()
    assert mapped == read


@pytest.mark.slow
@pytest.mark.parametrize("path", corpus(shared_transcripts()))
def test_real_transcripts_are_the_same_mapped(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode = "keep" if path.name == "cc_mclaude_c76e5be5.jsonl" else "error"
    read, mapped = _reduce_both(
        path, tmp_path, monkeypatch, config=default_config(), options=api.RunOptions(mode)
    )
    assert mapped == read
    assert api.restore_file(tmp_path / "out.jsonl") == path.read_bytes()


def _while_reducing(monkeypatch: pytest.MonkeyPatch, change: object) -> None:
    """Run ``change()`` after the stages, before the output is written."""
    for name in ("reduce_bytes", "rerun_bytes"):
        run = getattr(reducer, name)

        def reduce_then_change(*args: object, run: Any = run, **kw: object) -> object:
            result = run(*args, **kw)
            change()  # type: ignore[operator]
            return result

        monkeypatch.setattr(commit, name, reduce_then_change)


def test_a_file_rewritten_during_the_run_is_refused(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: None
) -> None:
    raw = synthetic.read_bytes()
    # Same size, other bytes, written into the same file: the map shows the new bytes.
    _while_reducing(monkeypatch, lambda: synthetic.write_bytes(raw.replace(b"a", b"b")))
    with pytest.raises(TranscriptError, match="changed while ctx read it"):
        api.reduce_file(synthetic, tmp_path / "out.jsonl", config=TIGHT)
    assert not (tmp_path / "out.jsonl").exists()
    assert not (tmp_path / "out.jsonl.offload").exists()


def test_lines_appended_during_the_run_are_left_for_the_next(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped: None
) -> None:
    raw = synthetic.read_bytes()
    out = tmp_path / "out.jsonl"
    _, expected = api.reduce_file(synthetic, out, config=TIGHT)
    shutil.rmtree(f"{out}.offload")
    out.unlink()

    def append() -> None:
        with synthetic.open("ab") as fh:
            fh.write(b'{"role": "user", "content": "more"}\n')

    _while_reducing(monkeypatch, append)
    _, reduced = api.reduce_file(synthetic, out, config=TIGHT)
    assert reduced == expected
    assert api.restore_file(out) == raw


def test_stats_of_a_file_changed_during_the_run_count_a_snapshot(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch, mapped: None
) -> None:
    from ctxcli.services.tokens.ledger import CountOptions

    counting = CountOptions(cache=False)
    line = b'{"role": "user", "content": "one more line"}\n'
    run = reducer.reduce_bytes
    calls: list[int] = []

    def reduce_then_append(raw: object, **kw: object) -> object:
        result = run(raw, **kw)  # type: ignore[arg-type]
        if not calls:
            with synthetic.open("ab") as fh:
                fh.write(line)
        calls.append(len(raw))  # type: ignore[arg-type]
        return result

    monkeypatch.setattr(api, "reduce_bytes", reduce_then_append)
    report = api.stats_file(synthetic, config=TIGHT, options=api.RunOptions(counting=counting))
    assert report.bytes_before == synthetic.stat().st_size
    assert calls == [synthetic.stat().st_size - len(line), synthetic.stat().st_size]
