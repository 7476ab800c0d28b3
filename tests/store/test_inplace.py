"""Changing a session where its client reads it: one transaction, records keyed by the file.

Issue 34 items 1, 2, 7, 8 and 15, the permissions of item 5, and issue 35's "a file ctx
wrote is not in use". The races run on real sessions from ../shared/transcripts and are
driven deterministically: the other writer acts when the run calls a chosen function for
the n-th time (a profile hook, no sleeps), for a bounded set of such moments.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcli.api import ChangedError, Destination, RunOptions, reduce, restore, restore_file
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.services.dirs import cache_dir, data_dir
from ctxcli.sessions import fix_in_place
from ctxcli.store.disk import OffloadStore
from ctxcli.store.history import LEGACY, changes, changes_dir
from ctxcli.store.index import FILE as INDEX_FILE
from ctxcli.store.inplace import InPlace
from support.cli import invoke
from support.session_layout import CC_MCLAUDE, Layout, age, build

# Fast and real: the chain truncates long outputs; approx counting keeps each run short.
CHAIN = build_config(
    {"tokenizer": "approx", "stages": [{"use": "truncate_tool_output", "max_chars": 800}]},
    "test chain",
)
IN_PLACE = Destination(in_place=True, stream=True)


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    return build(tmp_path / "home", monkeypatch)


class _At:
    """A profile hook: run ``action`` when ``code`` is called for the ``nth`` time (from 0)."""

    def __init__(self, code: CodeType, nth: int, action: Callable[[], None]) -> None:
        self.code, self.nth, self.action = code, nth, action
        self.calls = 0
        self.fired = False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self.code:
            if self.calls == self.nth:
                self.fired = True
                self.action()
            self.calls += 1


@contextmanager
def _hook(at: _At) -> Iterator[_At]:
    sys.setprofile(at)
    try:
        yield at
    finally:
        sys.setprofile(None)


MOMENTS: dict[str, CodeType] = {
    "the run starts": reduce_bytes.__code__,
    "a text is offloaded": OffloadStore.put.__code__,
    "the change is recorded": OffloadStore.commit.__code__,
    "the file is compared": InPlace.settle.__code__,
}


def _leftovers(*folders: Path) -> list[str]:
    return [p.name for folder in folders if folder.is_dir() for p in folder.rglob("*ctx-tmp*")]


# -- item 1: a line the client appends during the run is kept -----------------------------

_EXAMPLE = itertools.count()
APPENDED = (
    b'{"timestamp":"2025-09-25T09:00:00.000Z","type":"response_item","payload":'
    b'{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}}\n'
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    what=st.sampled_from(["appends a line", "finishes a line", "rewrites a line"]),
    moment=st.sampled_from(sorted(MOMENTS)),
    # The chain offloads 29 texts of this session: the nth is one of them.
    nth=st.integers(0, 28),
)
def test_what_the_client_writes_during_an_in_place_run(
    layout: Layout, what: str, moment: str, nth: int
) -> None:
    path = layout.codex_archived.with_name(f"rollout-{next(_EXAMPLE)}.jsonl")
    original = layout.codex_archived.read_bytes()
    # "finishes a line": the client was writing a line when ctx read the file.
    path.write_bytes(original + (APPENDED[:40] if what == "finishes a line" else b""))
    expected = original + APPENDED

    def client() -> None:
        data = path.read_bytes()
        if what == "rewrites a line":
            at = data.index(b'"timestamp":"2025') + len('"timestamp":"')
            path.write_bytes(data[:at] + b"1999" + data[at + 4 :])
        else:
            with path.open("ab") as fh:
                fh.write(APPENDED[40:] if what == "finishes a line" else APPENDED)

    nth = nth if moment == "a text is offloaded" else 0
    with _hook(_At(MOMENTS[moment], nth, client)) as at:
        if what == "rewrites a line":
            with pytest.raises(ChangedError, match="changed while ctx changed it"):
                reduce(path, IN_PLACE, config=CHAIN, options=RunOptions(force=True))
            assert at.fired
            assert b'"timestamp":"1999' in path.read_bytes()  # the client's, untouched
            assert changes(path) == []  # the record is undone with the change
            assert _leftovers(path.parent, changes_dir(path)) == []
            return
        change = reduce(path, IN_PLACE, config=CHAIN, options=RunOptions(force=True)).change
    assert change is not None
    assert at.fired
    assert change.record is not None and change.carried_bytes == len(APPENDED)
    now = path.read_bytes()
    assert now.endswith(APPENDED) and len(now) == change.bytes_after < len(expected)
    assert restore_file(path) == expected


# -- item 7: a repair and a reduction at once take turns ----------------------------------


def _other_run(run: Callable[[], object]) -> tuple[threading.Thread, threading.Event]:
    """Start ``run`` in a thread; the event is set once it waits for a lock, or is done."""
    waiting = threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and arg is fcntl.flock:
            waiting.set()

    def body() -> None:
        sys.setprofile(profile)
        try:
            run()
        finally:
            sys.setprofile(None)
            waiting.set()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, waiting


@pytest.mark.parametrize("first", ["doctor", "reduce"])
@pytest.mark.parametrize("moment", ["the run starts", "the change is recorded"])
def test_a_repair_and_a_reduction_at_once_take_turns(
    layout: Layout, first: str, moment: str
) -> None:
    path = layout.mclaude
    original = path.read_bytes()
    runs: dict[str, Callable[[], object]] = {
        "doctor": lambda: fix_in_place(path, force=True),
        "reduce": lambda: reduce(path, IN_PLACE, config=CHAIN, options=RunOptions(force=True)),
    }
    second = "reduce" if first == "doctor" else "doctor"
    started: list[threading.Thread] = []

    def start_the_other() -> None:
        thread, waiting = _other_run(runs[second])
        started.append(thread)
        waiting.wait(timeout=60)  # it blocks on the file's lock (or, unlocked, it is done)

    code = MOMENTS[moment] if moment != "the run starts" or first == "reduce" else None
    code = code or fix_in_place.__globals__["plan_fixes"].__code__
    with _hook(_At(code, 0, start_the_other)) as at:
        runs[first]()
    assert at.fired
    started[0].join(timeout=60)
    assert [p.name for p in changes(path)] == [f"0001-{first}", f"0002-{second}"]
    assert restore_file(path) == original
    restore(path, Destination(in_place=True), options=RunOptions(force=True))
    assert path.read_bytes() == original and changes(path) == []


# -- item 2: two files with one session id never share records ----------------------------


def test_a_copy_of_a_session_has_records_of_its_own(layout: Layout) -> None:
    a = layout.spotter
    original = a.read_bytes()
    b = a.parents[1] / "-home-USER-backup" / a.name  # same name, same sessionId
    b.parent.mkdir()
    shutil.copy2(a, b)
    invoke(["reduce", str(a), "--in-place"])
    reduced = a.read_bytes()
    err = invoke(["restore", str(b), "--in-place"], code=2).stderr
    assert "nothing to restore" in err
    assert b.read_bytes() == original and len(changes(a)) == 1
    # A copy of the reduced file restores through A's records, and leaves them to A.
    c = b.with_name("copy-of-reduced.jsonl")
    c.write_bytes(reduced)
    age(c, 3600)
    invoke(["restore", str(c), "--in-place"])
    assert c.read_bytes() == original and len(changes(a)) == 1
    assert restore_file(a) == original


def test_changes_in_the_previous_layout_still_restore(layout: Layout) -> None:
    a = layout.mclaude
    original = a.read_bytes()
    b = a.with_name("backup.jsonl")
    shutil.copy2(a, b)
    invoke(["doctor", str(a), "--fix"])
    change = reduce(a, IN_PLACE, config=CHAIN, options=RunOptions(force=True)).change
    assert change is not None
    assert change.record is not None
    # Where an older ctx kept them, by session id; its index did not know repairs.
    legacy = data_dir() / LEGACY / "claude_code" / CC_MCLAUDE
    legacy.parent.mkdir(parents=True)
    changes_dir(a).rename(legacy)
    (data_dir() / INDEX_FILE).unlink()
    assert restore_file(a) == original
    invoke(["restore", str(b), "--in-place"], code=2)  # B never changed: not B's to use
    assert sorted(p.name for p in legacy.iterdir()) == ["0001-doctor", "0002-reduce"]
    invoke(["restore", str(a), "--in-place"])
    assert a.read_bytes() == original and list(legacy.iterdir()) == []


# -- item 8: a second in-place run with nothing to change ---------------------------------


@pytest.mark.parametrize(
    ("session", "preset"),
    [
        ("subagent", None),
        ("subagent", "claude-code-resume"),
        ("codex_archived", None),
        ("codex_archived", "codex-resume"),
    ],
)
def test_a_second_in_place_run_has_nothing_to_change(
    layout: Layout, session: str, preset: str | None
) -> None:
    path = getattr(layout, session)
    chain = ["--preset", preset] if preset else []
    invoke(["reduce", str(path), "--in-place", *chain])
    reduced = path.read_bytes()
    result = invoke(["reduce", str(path), "--in-place", *chain])
    assert "nothing to change" in result.stderr
    assert path.read_bytes() == reduced and len(changes(path)) == 1


# -- item 15: a symlinked session stays a link --------------------------------------------


def test_a_linked_session_is_changed_through_its_link(layout: Layout) -> None:
    target = layout.home / "store" / "rollout.jsonl"
    target.parent.mkdir()
    link = layout.codex
    shutil.move(link, target)
    link.symlink_to(target)
    original = target.read_bytes()
    invoke(["reduce", str(link), "--in-place"])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() != original
    # Its records are the target's, under ctx's data directory, not beside the link.
    assert changes_dir(link) == changes_dir(target) and len(changes(target)) == 1
    assert not [p for p in link.parent.iterdir() if p.name != link.name]
    assert restore_file(target) == original
    invoke(["restore", str(link), "--in-place"])
    assert link.is_symlink() and target.read_bytes() == original


# -- item 5: removed text is private --------------------------------------------------------


def test_changes_and_ctx_directories_are_private(layout: Layout) -> None:
    data_dir().mkdir(parents=True, mode=0o755)  # as an older ctx left it
    os.chmod(data_dir(), 0o755)
    invoke(["doctor", str(layout.mclaude), "--fix"])
    invoke(["reduce", str(layout.mclaude), "--in-place"])
    dirs = [data_dir(), cache_dir(), *(p for p in data_dir().rglob("*") if p.is_dir())]
    files = [p for p in data_dir().rglob("*") if p.is_file()]
    assert len(changes(layout.mclaude)) == 2 and files
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in dirs} == {"0o700"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {"0o600"}


# -- issue 35: a file ctx wrote last is not in use; "in use" names --force -------------------


def test_a_file_ctx_wrote_last_is_not_in_use(layout: Layout) -> None:
    path = layout.codex
    invoke(["reduce", str(path), "--in-place"])
    invoke(["restore", str(path), "--in-place"])  # a fresh mtime, but ctx's
    invoke(["reduce", str(path), "--in-place"])
    with path.open("ab") as fh:  # the client writes after ctx: in use again
        fh.write(APPENDED)
    err = invoke(["reduce", str(path), "--in-place"], code=2).stderr
    assert "the session looks in use (it was modified 0s ago" in err
    assert "pass --force if it is not running" in err
    assert orjson.loads(path.read_bytes().splitlines()[-1])["payload"]["role"] == "user"
