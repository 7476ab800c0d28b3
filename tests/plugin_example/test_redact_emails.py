"""The plugin's own tests, written the way its author would: with ``ctxcli.testing``."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator

import pytest

from ctxcli.formats import load
from ctxcli.stages import STAGE_REGISTRY
from ctxcli.testing import assert_stage_roundtrip, run_stage

RECORDS = [
    {"role": "user", "content": "Who reported the outage? Mail me at me@example.com."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_tickets", "arguments": '{"q": "outage"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "ticket 41 by ada@example.com"},
]
TRANSCRIPT = b"".join(json.dumps(r).encode() + b"\n" for r in RECORDS)


@pytest.fixture(autouse=True)
def plugin() -> Iterator[None]:
    """The stage, registered by importing its module (installed, ctx loads it by name)."""
    importlib.import_module("ctx_redact_emails")
    yield
    STAGE_REGISTRY.reset()  # back to the built-in stages only
    del sys.modules["ctx_redact_emails"]


def test_addresses_in_tool_results_are_replaced() -> None:
    conv = load(TRANSCRIPT, "tickets.jsonl").conversation
    run = run_stage("redact_emails", conv, replacement="<email>")
    assert run.conversation.messages[2].blocks[0].text == "ticket 41 by <email>"
    assert run.conversation.messages[0] == conv.messages[0]  # text is left alone
    assert run.counters == {"redacted": 1} and run.offloaded == {}


def test_restore_brings_every_address_back() -> None:
    out = assert_stage_roundtrip("redact_emails", TRANSCRIPT, kinds=["tool_result", "text"])
    assert b"@example.com" not in out
