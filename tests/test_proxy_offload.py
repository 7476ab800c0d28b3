"""The live offload store under several writers: every hint cites its own conversation's text.

The proxy runs one reducer per conversation, all writing into one offload directory, and
Claude Code's parallel subagents send their conversations at once. These tests race the
writers for real (threads released together by a barrier, a bounded number of rounds) on
tool outputs taken from a real Claude Code session, and check what every cited file holds
and who may read it.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import SHARED
from ctxcli.agent.reducer import Reducer
from ctxcli.store.live import LiveOffload

SESSION = SHARED / "cc_spotter_4d5611e5.jsonl"
needs_session = pytest.mark.skipif(not SESSION.is_file(), reason=f"{SESSION} is not present")
ROUNDS = 12
"""Rounds of a race: each releases every writer at once (bounded, no sleeps)."""


def real_outputs(count: int, min_chars: int = 2000) -> list[str]:
    """``count`` distinct tool outputs of at least ``min_chars`` from the real session."""
    found: list[str] = []
    with SESSION.open(encoding="utf-8") as fh:
        for line in fh:
            message = json.loads(line).get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    inner = part.get("content")
                    text = inner if isinstance(inner, str) else _joined(inner)
                    if len(text) >= min_chars and text not in found:
                        found.append(text)
    assert len(found) >= count, f"{SESSION} has only {len(found)} large tool outputs"
    return found[:count]


def _joined(parts: object) -> str:
    items = parts if isinstance(parts, list) else []
    return "".join(p.get("text", "") for p in items if isinstance(p, dict))


def race(workers: list[Callable[[], str]]) -> list[str]:
    """Run every worker on its own thread, released together; their results in order."""
    barrier = threading.Barrier(len(workers))
    results: list[str] = [""] * len(workers)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = workers[i]()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@needs_session
def test_stores_racing_on_one_name_each_keep_their_own_text(tmp_path: Path) -> None:
    texts = real_outputs(8)
    for n in range(ROUNDS):
        root = tmp_path / f"round-{n}"
        stores = [LiveOffload(root) for _ in texts]
        # The same call id in eight conversations (forks of one session reuse their ids).
        cited = race(
            [
                lambda s=s, t=t: s.put("clear", "toolu_01", t)  # type: ignore[misc]
                for s, t in zip(stores, texts, strict=True)
            ]
        )
        for path, text in zip(cited, texts, strict=True):
            assert Path(path).read_text(encoding="utf-8") == text, f"round {n}: {path}"
        assert len(set(cited)) == len(texts)


@needs_session
def test_the_same_text_under_the_same_name_is_one_file(tmp_path: Path) -> None:
    text = real_outputs(1)[0]
    stores = [LiveOffload(tmp_path) for _ in range(8)]
    cited = race([lambda s=s: s.put("trunc", "toolu_01", text) for s in stores])  # type: ignore[misc]
    assert set(cited) == {str(tmp_path.resolve() / "trunc" / "toolu_01")}
    assert sorted(p.name for p in (tmp_path / "trunc").iterdir()) == ["toolu_01"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_offloaded_text_is_private_to_its_owner(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = LiveOffload(tmp_path / "new" / "off")
        cited = Path(store.put("clear", "3", "AWS_SECRET=hunter2\n"))
        other = Path(store.put("clear", "3", "another text"))
        reducer = Reducer(preset="eino", offload_dir=tmp_path / "reducer")
        written = Path(reducer.offload.put("trunc", "call_1", "token=abc\n"))
    finally:
        os.umask(old)
    for path in (cited, other, written):
        assert _mode(path) == 0o600, path
        assert _mode(path.parent) == 0o700, path.parent
    assert _mode(tmp_path / "new" / "off") == 0o700
    assert _mode(tmp_path / "new") == 0o700
    assert _mode(tmp_path / "reducer") == 0o700
