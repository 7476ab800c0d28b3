"""The plugin's own tests, written the way its author would: with ``ctxcli.testing``."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcli.formats import FORMAT_REGISTRY, load
from ctxcli.testing import (
    assert_dump_restores,
    assert_format_identity,
    assert_golden,
    assert_roundtrip,
)

LOG = [
    {"who": "user", "says": "Find the outage ticket."},
    {
        "who": "agent",
        "says": "Searching.",
        "calls": [{"id": "c1", "tool": "search", "args": '{"q": "outage"}'}],
    },
    {"who": "tool", "id": "c1", "tool": "search", "says": "ticket 41\n" + "log line\n" * 300},
    {"who": "agent", "says": "Ticket 41 it is.", "mood": "relieved"},
]
TRANSCRIPT = b"".join(json.dumps(r).encode() + b"\n" for r in LOG)
TRUNCATE = {"stages": [{"use": "truncate_tool_output", "max_chars": 300}]}
GOLDEN = Path(__file__).with_name("truncated.golden.jsonl")


@pytest.fixture(autouse=True)
def plugin() -> Iterator[None]:
    """The format, registered by importing its module (installed, ctx loads it by name)."""
    importlib.import_module("ctx_chatlog_format")
    yield
    FORMAT_REGISTRY.reset()  # back to the built-in formats only
    del sys.modules["ctx_chatlog_format"]


def test_an_untouched_log_is_copied_as_it_is() -> None:
    doc = assert_format_identity(TRANSCRIPT, "chatlog")
    assert [m.role for m in doc.conversation.messages] == ["user", "assistant", "tool", "assistant"]


def test_a_reduced_log_restores_and_matches_its_golden(update_goldens: bool) -> None:
    """``pytest --update-goldens`` rewrites the golden file (then review its diff)."""
    out = assert_roundtrip(TRANSCRIPT, TRUNCATE, format="chatlog")
    assert len(out) < len(TRANSCRIPT)
    assert_golden(out, GOLDEN, update=update_goldens)


def test_an_edited_conversation_is_written_and_restored() -> None:
    doc = load(TRANSCRIPT, "log.jsonl", format="chatlog")
    conv = doc.conversation
    last = conv.messages[3]
    edited = conv.with_messages(
        [*conv.messages[:3], last.with_blocks([last.blocks[0].with_text("Done.")])]
    )
    out = assert_dump_restores(doc, edited)
    assert json.loads(out.splitlines()[3]) == {"who": "agent", "says": "Done.", "mood": "relieved"}
