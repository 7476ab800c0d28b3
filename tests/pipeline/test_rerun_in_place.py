"""An incremental re-run adds to the previous run's offload directory instead of copying it.

The previous directory's files are never changed once written, so a re-run only moves
its new files in, writes its pack under the other of two names and replaces the
manifest last, keeping the previous one (``manifest.prev.json``) until the new output
is in place. These tests stop a re-run at each step of that commit, as a kill would,
and check that the output on disk then still restores, and that the next run succeeds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_rerun import CONFIGS, cut_at, session

from ctxcli.api import Destination, reduce, restore_file
from ctxcli.core.errors import OffloadError
from ctxcli.pipeline.results import Report
from ctxcli.store.disk import OffloadStore
from ctxcli.store.manifest import MANIFEST, OTHER_PACK, PACK, PREVIOUS_MANIFEST

CONFIG = CONFIGS["default-like"]
# Outputs made in two directories are compared: both cite one relative offload path.
OUT = Destination("out.jsonl", cite_as="out.jsonl.offload")


def _reduce() -> tuple[Report, bytes]:
    done = reduce("session.jsonl", OUT, config=CONFIG)
    return done.report, done.output


OFF = Path("out.jsonl.offload")


class Killed(BaseException):
    """The run stops here, as if killed: nothing after this point runs."""


@pytest.fixture
def grown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    """A session reduced into out.jsonl, then grown on disk (not reduced again yet)."""
    monkeypatch.chdir(tmp_path)
    whole = session(60, seed=5)
    start = cut_at(whole, 0.8)
    Path("session.jsonl").write_bytes(start)
    _reduce()
    Path("session.jsonl").write_bytes(whole)
    return start, whole


def _full_run(whole: bytes, where: Path) -> bytes:
    where.mkdir()
    cwd = os.getcwd()
    os.chdir(where)
    try:
        Path("session.jsonl").write_bytes(whole)
        _reduce()
        return Path("out.jsonl").read_bytes()
    finally:
        os.chdir(cwd)


def test_a_rerun_moves_in_only_its_new_files(grown: tuple[bytes, bytes]) -> None:
    _start, whole = grown
    before = {p: os.stat(p) for p in OFF.glob("*/*")}
    report, _ = _reduce()
    assert report.kept_lines > 0
    for path, st in before.items():  # the same files, neither copied nor linked
        now = os.stat(path)
        assert (now.st_ino, now.st_nlink, now.st_mtime_ns) == (st.st_ino, 1, st.st_mtime_ns)
    assert len(list(OFF.glob("*/*"))) > len(before)
    # The pack changed names; the previous pack and manifest are gone.
    assert (OFF / OTHER_PACK).is_file() and not (OFF / PACK).exists()
    assert not (OFF / PREVIOUS_MANIFEST).exists()
    assert not list(Path.cwd().glob(".out.jsonl.offload.ctx-*"))
    assert restore_file("out.jsonl") == whole
    assert Path("out.jsonl").read_bytes() == _full_run(whole, Path("full"))
    # And back to the first name on the next re-run.
    Path("session.jsonl").write_bytes(whole + session(64, seed=5)[len(whole) :])
    report, _ = _reduce()
    assert report.kept_lines > 0
    assert (OFF / PACK).is_file() and not (OFF / OTHER_PACK).exists()
    assert restore_file("out.jsonl") == Path("session.jsonl").read_bytes()


def _stop_at(monkeypatch: pytest.MonkeyPatch, target: str, exc: BaseException) -> None:
    """Make the os.replace onto ``target`` raise ``exc`` (once)."""
    real = os.replace

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.abspath(dst) == os.path.abspath(target):
            monkeypatch.setattr(os, "replace", real)
            raise exc
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def _killed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A killed process cleans nothing up.
    monkeypatch.setattr(OffloadStore, "abort", lambda self: None)


KILLS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "new files moved in, pack not yet": lambda mp: (
        _killed(mp),
        _stop_at(mp, str(OFF / OTHER_PACK), Killed()),
    ),
    "pack moved in, manifest not yet": lambda mp: (
        _killed(mp),
        _stop_at(mp, str(OFF / MANIFEST), Killed()),
    ),
    "manifest replaced, output not yet": lambda mp: (
        _killed(mp),
        _stop_at(mp, "out.jsonl", Killed()),
    ),
    "the output could not be replaced": lambda mp: _stop_at(
        mp, "out.jsonl", PermissionError(13, "Permission denied")
    ),
}


@pytest.mark.parametrize("moment", list(KILLS))
def test_a_rerun_stopped_anywhere_leaves_the_previous_output_restorable(
    grown: tuple[bytes, bytes], moment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, whole = grown
    previous_output = Path("out.jsonl").read_bytes()
    with monkeypatch.context() as mp:
        KILLS[moment](mp)
        with pytest.raises((Killed, OSError)):
            _reduce()
    assert Path("out.jsonl").read_bytes() == previous_output
    assert restore_file("out.jsonl", "back.jsonl") == start
    if moment == "the output could not be replaced":  # not killed: the manifest went back
        assert not (OFF / PREVIOUS_MANIFEST).exists()
    # The next run succeeds and is a full run's equal.
    report, _ = _reduce()
    assert restore_file("out.jsonl") == whole
    assert Path("out.jsonl").read_bytes() == _full_run(whole, Path("full"))
    assert not (OFF / PREVIOUS_MANIFEST).exists()


def test_a_directory_changed_during_the_rerun_is_refused(
    grown: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    start, _whole = grown
    previous_output = Path("out.jsonl").read_bytes()
    adopt = OffloadStore.adopt

    def adopt_then_another_run_commits(self: OffloadStore, *args: Any) -> None:
        adopt(self, *args)
        data = (OFF / MANIFEST).read_bytes()
        (OFF / "manifest.tmp").write_bytes(data)
        os.replace(OFF / "manifest.tmp", OFF / MANIFEST)  # a new inode, as a commit makes

    monkeypatch.setattr(OffloadStore, "adopt", adopt_then_another_run_commits)
    with pytest.raises(OffloadError, match="changed while this run went on"):
        _reduce()
    assert Path("out.jsonl").read_bytes() == previous_output
    assert restore_file("out.jsonl", "back.jsonl") == start
    assert not list(Path.cwd().glob(".out.jsonl*ctx-tmp-*"))


def test_a_file_system_without_hard_links_still_keeps_the_previous_manifest(
    grown: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _start, whole = grown
    kept: list[bytes] = []
    real_replace = os.replace

    def no_link(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.abspath(dst) == os.path.abspath(OFF / MANIFEST):
            kept.append((OFF / PREVIOUS_MANIFEST).read_bytes())
        real_replace(src, dst, *args, **kwargs)

    before = (OFF / MANIFEST).read_bytes()
    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(os, "replace", replace)
    report, _ = _reduce()
    assert report.kept_lines > 0
    assert kept == [before]  # copied, since it could not be linked
    assert not (OFF / PREVIOUS_MANIFEST).exists()
    assert restore_file("out.jsonl") == whole
