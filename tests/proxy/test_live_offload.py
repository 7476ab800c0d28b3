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
import re
import stat
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxcli.agent.reducer import Reducer
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from ctxcli.store.live import LiveOffload
from support.fake_api import FakeServer, MessagesAPI
from support.paths import SHARED

SESSION = SHARED / "cc_spotter_4d5611e5.jsonl"
needs_session = pytest.mark.real_data  # skips without ../shared (fails in CI)
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
            [partial(s.put, "clear", "toolu_01", t) for s, t in zip(stores, texts, strict=True)]
        )
        for path, text in zip(cited, texts, strict=True):
            assert Path(path).read_text(encoding="utf-8") == text, f"round {n}: {path}"
        assert len(set(cited)) == len(texts)


@needs_session
def test_the_same_text_under_the_same_name_is_one_file(tmp_path: Path) -> None:
    text = real_outputs(1)[0]
    stores = [LiveOffload(tmp_path) for _ in range(8)]
    cited = race([partial(s.put, "trunc", "toolu_01", text) for s in stores])
    assert set(cited) == {str(tmp_path.resolve() / "trunc" / "toolu_01")}
    assert sorted(p.name for p in (tmp_path / "trunc").iterdir()) == ["toolu_01"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.may_skip(reason="a platform property")
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


# -- through the real proxy: eight conversations at once -----------------------------------

CONVERSATIONS = 8
TURNS = 6
PROXY_ROUNDS = 3
"""Fresh proxies, each with eight conversations of six requests released step by step."""

CHAIN = """
[[stages]]
use = "truncate_tool_output"
max_chars = 3000

[[stages]]
use = "clear_tool_results"
max_tokens = 4000
keep_rounds = 1
"""


def _history(conv: int, turns: int, outputs: dict[tuple[int, str], str]) -> list[Any]:
    """Conversation ``conv`` after ``turns`` tool rounds; its call ids are every conversation's."""
    messages: list[Any] = [{"role": "user", "content": f"Conversation {conv}: read the files."}]
    for k in range(turns):
        call = f"toolu_{k:02d}"
        use = {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": f"/p/{k}"}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": call, "content": outputs[(conv, call)]}
        messages.append({"role": "user", "content": [result]})
    return messages


def _cited(text: str, root: str) -> list[str]:
    return re.findall(re.escape(root) + r"/[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+", text)


def _stands_for(path: str, original: str, root: str) -> bool:
    """The file holds ``original``, or a preview of it citing a file that holds it."""
    held = Path(path).read_text(encoding="utf-8")
    if held == original:
        return True
    inner = _cited(held, root)
    same_head = held.splitlines()[:1] == original.splitlines()[:1]
    return bool(inner) and same_head and all(_stands_for(p, original, root) for p in inner)


def _check_hints(bodies: list[Any], outputs: dict[tuple[int, str], str], root: str) -> int:
    """Every hint in every forwarded body cites its own conversation's text; how many."""
    checked = 0
    for body in bodies:
        conv = int(body["messages"][0]["content"].split()[1].rstrip(":"))
        for msg in body["messages"][1:]:
            for part in msg["content"] if isinstance(msg["content"], list) else []:
                if part.get("type") != "tool_result":
                    continue
                text = (
                    part["content"]
                    if isinstance(part["content"], str)
                    else _joined(part["content"])
                )
                for path in _cited(text, root):
                    original = outputs[(conv, part["tool_use_id"])]
                    assert _stands_for(path, original, root), (
                        f"conversation {conv}, {part['tool_use_id']}: {path} holds another text"
                    )
                    checked += 1
    return checked


def _converse(url: str, conv: int, steps: threading.Barrier, outputs: dict[Any, str]) -> str:
    """Send conversation ``conv`` one tool round at a time, in step with the others."""
    headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    with httpx.Client(timeout=60) as http:
        for turns in range(1, TURNS + 1):
            body = {"model": "claude-x", "max_tokens": 64, "system": "You code."}
            body["messages"] = _history(conv, turns, outputs)
            steps.wait()  # the eight requests of this step go at once
            answer = http.post(f"{url}/v1/messages", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
    return ""


@needs_session
def test_eight_conversations_through_one_proxy_cite_their_own_texts(tmp_path: Path) -> None:
    pool = real_outputs(24, min_chars=1500)
    # Same call ids in every conversation, a different real output behind each.
    outputs = {
        (c, f"toolu_{k:02d}"): pool[(k + 3 * c) % len(pool)]
        for c in range(CONVERSATIONS)
        for k in range(TURNS)
    }
    config = tmp_path / "ctx.toml"
    config.write_text(CHAIN)
    for n in range(PROXY_ROUNDS):
        root = tmp_path / f"round-{n}"
        with FakeServer(MessagesAPI(), lifetime_s=300) as api:
            settings = ProxySettings(
                upstream=api.base_url, offload_dir=str(root), preset=None,
                config=str(config), clear_at_least=0,
            )  # fmt: skip
            with ProxyServer(ProxyCore(settings)) as proxy:
                steps = threading.Barrier(CONVERSATIONS)
                race(
                    [partial(_converse, proxy.url, c, steps, outputs) for c in range(CONVERSATIONS)]
                )
            bodies = [r.body for r in api.posts("/v1/messages")]
        assert len(bodies) == CONVERSATIONS * TURNS
        assert _check_hints(bodies, outputs, str(root.resolve())) > CONVERSATIONS * 2


@pytest.mark.parametrize("scheme", ["file://", "local://"])
def test_a_local_url_is_the_local_directory(tmp_path: Path, scheme: str) -> None:
    """The live store reads URLs with the one rule of core.io: a local URL is its path."""
    store = LiveOffload(f"{scheme}{tmp_path / 'off'}")
    cited = store.put("clear", "call_1", "removed text")
    assert store.root == str(tmp_path / "off")
    assert Path(cited).read_text() == "removed text"
