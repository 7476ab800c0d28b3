"""summarize: one summary message instead of old history, never splitting a call from its result.

The stage's cut, idempotency and failure handling; the extractive summarizer; the
Anthropic summarizer through the real SDK against a loopback server (tests/support/fake_api).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.errors import ConfigError
from ctxcli.core.hints import is_summary
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats import load
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.services.summarizer import ExtractiveSummarizer, SummarizerError
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import StageContext, TokenLedger, get_stage
from ctxcli.stages.base import StageResult
from ctxcli.store.naming import Preview
from support.fake_api import (
    AnthropicServer,
    Reply,
    Request,
    garbage,
    message,
    rate_limited,
    server_error,
    timeout,
)
from support.paths import FIXTURES

SYNAPTIC = FIXTURES / "synaptic"


def run(
    conv: Conversation,
    *,
    services: dict[str, Any] | None = None,
    log: Callable[[str], None] = lambda _m: None,
    **options: object,
) -> StageResult:
    """The stage on ``conv``; ``services`` are StageContext fields (summarizer, anthropic, answers)."""
    spec = get_stage("summarize")
    ctx = StageContext(
        TokenLedger(get_counter("approx")), Preview("off"), log=log, **(services or {})
    )
    return spec.fn(conv, spec.options(**options), ctx)


def fixture(name: str) -> Conversation:
    path = SYNAPTIC / name
    return load(path.read_bytes(), str(path)).conversation


def reduce(tmp_path: Path, source: Path, stages: list[dict[str, object]]) -> bytes:
    """Reduce end to end; check restore, rerun and pairing; return the output."""
    config = build_config({"tokenizer": "approx", "stages": stages}, "test")
    out = tmp_path / f"{source.name}.out"
    _, data = reduce_file(source, out, config=config, offload_dir=tmp_path / f"{source.name}.off")
    assert restore_file(out, offload_dir=tmp_path / f"{source.name}.off") == source.read_bytes()
    _, again = reduce_file(out, config=config, offload_dir=tmp_path / f"{source.name}.again")
    assert again == data
    assert validate_bytes(data) == []
    return data


def copy_fixture(tmp_path: Path, name: str) -> Path:
    source = tmp_path / name
    source.write_bytes((SYNAPTIC / name).read_bytes())
    return source


SESSION_STAGES: list[dict[str, object]] = [
    {"use": "summarize", "max_tokens": 1000, "keep_tokens": 200}
]


def test_history_becomes_one_summary_naming_its_file(tmp_path: Path) -> None:
    source = copy_fixture(tmp_path, "session.jsonl")
    out = reduce(tmp_path, source, SESSION_STAGES)
    records = [json.loads(line) for line in out.splitlines()]
    original = [json.loads(line) for line in source.read_bytes().splitlines()]
    assert records[0] == original[0]
    summary = records[1]
    assert summary["role"] == "user"
    path = tmp_path / "session.jsonl.off" / "summarize" / "r1-r11"
    assert summary["content"].startswith(
        f"[ctx: summary of 11 earlier messages; full text saved to {tmp_path}/session.jsonl.off/summarize/"
        "r1-r11]\n"
    )
    # The tail is verbatim, and starts on a user turn, not on a tool result.
    assert records[2:] == original[12:]
    # The summarized messages can be read back from the named file.
    saved = path.read_text()
    assert "The cache expiry test fails on CI." in saved
    assert "FAILED tests/test_cache.py::test_expiry" in saved
    assert "--- message 11 (assistant) ---\nFixed: settings now pass CACHE_TTL" in saved


def test_extractive_summary_keeps_goals_files_commands_errors_and_state() -> None:
    conv = fixture("session.jsonl")
    text = ExtractiveSummarizer().summarize(conv.with_messages(conv.messages[1:12]), len)
    assert text == (
        "Summary of the earlier conversation (extracted from the transcript):\n"
        "\n"
        "User requests (1, oldest first):\n"
        "1. The cache expiry test fails on CI. Find out why and fix it; do not change the "
        "public API of src/app/cache.py.\n"
        "\n"
        "Tools used: read_file x2, bash x2, edit_file x1\n"
        "\n"
        "Files read: src/app/cache.py, tests/test_cache.py\n"
        "\n"
        "Files written: src/app/settings.py\n"
        "\n"
        "Commands run:\n"
        "- `pytest tests/test_cache.py -q` -> exit 1\n"
        "- `pytest -q` -> exit 0\n"
        "\n"
        "Errors seen:\n"
        "- bash: FAILED tests/test_cache.py::test_expiry - AssertionError: assert 0 == 300\n"
        "\n"
        "Last assistant message:\n"
        "Fixed: settings now pass CACHE_TTL (default 300); the full suite passes (120 tests)."
    )


def test_under_the_trigger_nothing_changes() -> None:
    conv = fixture("session.jsonl")
    result = run(conv, max_tokens=100_000)
    assert result.conversation is conv
    assert result.notes[0].endswith("tokens <= max_tokens 100000")


def test_the_cut_never_splits_parallel_calls_from_their_results() -> None:
    # session.jsonl records 13-15: an assistant turn calling t6 and t7, then their
    # results. Keeping the last 8 messages would start at t7's result, without its
    # call: the provider answers 400 (langchain #38352, deepagents #270).
    conv = fixture("session.jsonl")
    result = run(conv, trigger="always", keep_messages=8)
    messages = result.conversation.messages
    assert messages[0].key == 0
    assert is_summary(messages[1].text) and messages[1].key is None
    assert [m.key for m in messages[2:]] == list(range(13, 23))
    assert result.counters == {"summarized": 12, "failures": 0}


def test_rerun_does_not_summarize_the_summary(tmp_path: Path) -> None:
    source = copy_fixture(tmp_path, "session.jsonl")
    stages: list[dict[str, object]] = [
        {"use": "summarize", "trigger": "always", "keep_messages": 8}
    ]
    out = reduce(tmp_path, source, stages)  # asserts the rerun is byte-identical
    conv = load(out, "out").conversation
    result = run(conv, trigger="always", keep_messages=8)
    assert result.conversation is conv
    assert result.notes == ("nothing new to summarize",)


def test_new_history_after_a_summary_is_folded_into_the_next_one(tmp_path: Path) -> None:
    source = copy_fixture(tmp_path, "session.jsonl")
    first = reduce(tmp_path, source, SESSION_STAGES)
    # The session went on: three more exchanges push it over the trigger again.
    more = b"".join(
        json.dumps({"role": role, "content": f"{role} turn {i}: " + "details " * 400}).encode()
        + b"\n"
        for i in range(3)
        for role in ("user", "assistant")
    )
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(first + more)
    second = reduce(tmp_path, grown, SESSION_STAGES)
    summary = json.loads(second.splitlines()[1])["content"]
    assert summary.startswith("[ctx: summary of ")
    assert summary.count("[ctx: summary of") == 1
    assert "Earlier summary:\nSummary of the earlier conversation" in summary
    # What the first summary kept is still there.
    assert "- `pytest tests/test_cache.py -q` -> exit 1" in summary


class Failing:
    name = "failing"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def summarize(self, conv: Conversation, count_tokens: Callable[[str], int]) -> str:
        raise self.exc


def test_a_failed_summary_leaves_the_transcript_unchanged() -> None:
    conv = fixture("session.jsonl")
    logged: list[str] = []
    result = run(
        conv,
        services={"summarizer": Failing(SummarizerError("Anthropic summary failed: timeout"))},
        log=logged.append,
        max_tokens=1000,
        keep_tokens=200,
    )
    assert result.conversation is conv
    assert result.counters == {"summarized": 0, "failures": 1}
    assert result.notes == (
        "summary failed, transcript left unchanged: Anthropic summary failed: timeout",
    )
    assert logged == ["summarize: " + result.notes[0]]


def test_a_summary_longer_than_the_history_is_not_used() -> None:
    class Verbose:
        name = "verbose"

        def summarize(self, conv: Conversation, count_tokens: Callable[[str], int]) -> str:
            return "word " * 5000

    conv = fixture("session.jsonl")
    result = run(conv, services={"summarizer": Verbose()}, max_tokens=1000, keep_tokens=200)
    assert result.conversation is conv
    assert result.counters["summarized"] == 0
    assert "would not halve what it replaces" in result.notes[0]


def test_too_little_history_is_not_sent_to_a_summarizer() -> None:
    conv = fixture("parallel.jsonl")
    failing = Failing(AssertionError("the summarizer must not be called"))
    result = run(conv, services={"summarizer": failing}, trigger="always", keep_messages=14)
    assert result.conversation is conv
    assert result.notes == ("only 9 tokens to summarize; kept",)


def test_anthropic_without_a_key_fails_softly_and_names_the_offline_choice() -> None:
    conv = fixture("session.jsonl")
    result = run(conv, summarizer="anthropic", max_tokens=1000, keep_tokens=200)
    assert result.conversation is conv
    assert result.counters == {"summarized": 0, "failures": 1}
    assert result.notes == (
        "summary failed, transcript left unchanged: ANTHROPIC_API_KEY is not set; set it, "
        'or use summarizer = "extractive" (offline)',
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_tokens": 1000, "keep_tokens": 1000},
            "keep_tokens = 1000 is invalid: must be below max_tokens (1000)",
        ),
        (
            {"keep_tokens": 10, "keep_messages": 3},
            "keep_messages = 3 is invalid: set keep_tokens or keep_messages, not both",
        ),
        (
            {"chunk_tokens": 4000, "summary_max_tokens": 2000},
            "summary_max_tokens = 2000 is invalid: must be at most a quarter of "
            "chunk_tokens (4000)",
        ),
    ],
)
def test_option_mistakes_are_config_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"stages": [{"use": "summarize", **options}]}, "ctx.toml")
    assert message in str(info.value)


def test_keep_tokens_may_reach_max_tokens_when_always_triggered() -> None:
    """max_tokens is only the trigger's threshold: with trigger = "always" it bounds nothing."""
    config = build_config(
        {"stages": [{"use": "summarize", "trigger": "always", "keep_tokens": 5, "max_tokens": 1}]},
        "ctx.toml",
    )
    opts = config.stages[0].options.model_dump(include={"trigger", "keep_tokens", "max_tokens"})
    assert opts == {"trigger": "always", "keep_tokens": 5, "max_tokens": 1}
    conv = fixture("session.jsonl")
    result = run(conv, trigger="always", keep_tokens=5, max_tokens=1)
    # Five tokens hold no whole message: all but the leading system message is summarized.
    assert result.counters == {"summarized": len(conv.messages) - 1, "failures": 0}
    system, summary = result.conversation.messages
    assert system is conv.messages[0]
    assert is_summary(summary.text) and summary.key is None


# -- the extractive summarizer on agent-specific tool shapes -------------------------


def _conv(*messages: Message) -> Conversation:
    return Conversation(messages)


def _call(cid: str, name: str, args: object) -> Block:
    text = args if isinstance(args, str) else json.dumps(args)
    return Block(Kind.TOOL_CALL, text, cid, name)


def _result(cid: str, text: str, *, is_error: bool = False) -> Block:
    return Block(Kind.TOOL_RESULT, text, cid, is_error=is_error)


def test_extractive_reads_editor_commands_patches_and_shell_lists() -> None:
    conv = _conv(
        Message("user", (Block(Kind.TEXT, "<system-reminder>ignore me</system-reminder>"),)),
        Message("user", (Block(Kind.TEXT, "Fix the parser."),)),
        Message(
            "assistant",
            (
                _call("1", "str_replace_editor", {"command": "view", "path": "/r/a.py"}),
                _call("2", "str_replace_editor", {"command": "str_replace", "path": "/r/b.py"}),
                _call("3", "shell", {"command": ["bash", "-lc", "make test"]}),
                _call("4", "apply_patch", "*** Begin Patch\n*** Update File: src/c.py\n@@\n"),
                _call("5", "Edit", {"file_path": "/r/d.py", "old_string": "x"}),
                _call("6", "lookup", {"q": "parser"}),
            ),
        ),
        Message(
            "tool",
            (
                _result("1", "1 import x"),
                _result("2", "edited"),
                _result(
                    "3", 'Traceback (most recent call last):\nValueError: bad token\n"exit_code": 2'
                ),
                _result("4", "Success."),
                _result("5", "Exit code 1\nString not found in file", is_error=True),
                _result("6", "nothing"),
            ),
        ),
    )
    text = ExtractiveSummarizer().summarize(conv, len)
    assert "ignore me" not in text
    assert "1. Fix the parser." in text
    assert "Files read: /r/a.py" in text
    assert "Files written: /r/b.py, src/c.py, /r/d.py" in text
    assert "- `make test` -> exit 2" in text
    assert '- lookup {"q": "parser"}' in text
    assert "- shell: ValueError: bad token" in text
    assert "- Edit: Exit code 1 / String not found in file" in text


def test_extractive_shortens_common_path_prefixes() -> None:
    conv = _conv(
        Message(
            "assistant",
            (
                _call("1", "Read", {"file_path": "/home/u/proj/src/a.py"}),
                _call("2", "Write", {"file_path": "/home/u/proj/tests/t.py"}),
            ),
        ),
        Message("user", (_result("1", "a"), _result("2", "ok"))),
    )
    text = ExtractiveSummarizer().summarize(conv, len)
    assert (
        "Files (paths relative to /home/u/proj/):\nFiles read: src/a.py\nFiles written: tests/t.py"
        in text
    )


def test_extractive_quotes_first_and_latest_requests_of_many() -> None:
    conv = _conv(*(Message("user", (Block(Kind.TEXT, f"request {i}"),)) for i in range(20)))
    text = ExtractiveSummarizer(max_requests=5).summarize(conv, len)
    assert (
        "User requests (20, oldest first):\n1. request 0\n  (15 more requests in between)\n" in text
    )
    assert text.endswith("17. request 16\n18. request 17\n19. request 18\n20. request 19")


# -- the Anthropic summarizer, real SDK, loopback server ------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicServer]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with AnthropicServer() as srv:
        yield srv


def run_anthropic(server: AnthropicServer, conv: Conversation, **options: object) -> StageResult:
    settings: dict[str, object] = {
        "summarizer": "anthropic",
        "base_url": server.base_url,
        "max_tokens": 1000,
        "keep_tokens": 200,
        "timeout_seconds": 2.0,
        "max_retries": 0,
        **options,
    }
    return run(conv, **settings)


def test_anthropic_summary_replaces_the_history(server: AnthropicServer) -> None:
    server.push(message("The user wants the cache TTL fixed; settings.py now reads CACHE_TTL."))
    conv = fixture("session.jsonl")
    result = run_anthropic(server, conv)
    assert result.counters == {"summarized": 11, "failures": 0}
    summary = result.conversation.messages[1]
    assert summary.role == "user" and summary.key is None
    assert summary.text == (
        "[ctx: summary of 11 earlier messages; full text saved to off/summarize/r1-r11]\n"
        "The user wants the cache TTL fixed; settings.py now reads CACHE_TTL."
    )
    assert [m.key for m in result.conversation.messages[2:]] == list(range(12, 23))
    (request,) = server.requests
    assert request.body["model"] == "claude-haiku-4-5"
    # The key was sent (as x-api-key or a bearer token, by SDK version), never recorded.
    assert "<redacted>" in (request.headers.get("x-api-key"), request.headers.get("authorization"))
    assert "goals, requests and constraints" in request.system
    assert "commands run and their outcome" in request.system
    assert request.prompt.startswith("<transcript>\n--- message 0 (user) ---\nThe cache expiry")
    assert "[tool result bash id=t3]\nExit code: 1" in request.prompt
    # Only the summarized part is sent: the kept tail is not.
    assert "gh pr create" not in request.prompt


def test_anthropic_model_prompt_and_base_url_from_the_environment(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    server.push(message("short"))
    result = run_anthropic(
        server, fixture("session.jsonl"), base_url=None, model="claude-x", prompt="Be brief."
    )
    assert result.counters["summarized"] == 11
    assert server.requests[0].body["model"] == "claude-x"
    assert server.requests[0].system == "Be brief."


@pytest.mark.parametrize(
    ("replies", "options", "reason", "requests"),
    [
        ([timeout(5.0)], {"timeout_seconds": 0.3}, "timeout", 1),
        ([server_error(), server_error(), server_error()], {"max_retries": 2}, "HTTP 500", 3),
        ([rate_limited()], {}, "HTTP 429 rate limited", 1),
        ([message("   ")], {}, "the reply was empty", 1),
        ([garbage()], {}, "", 1),
    ],
    ids=["timeout", "500-after-retries", "429", "empty", "malformed"],
)
def test_anthropic_failure_leaves_the_transcript_unchanged(
    server: AnthropicServer,
    replies: list[Reply],
    options: dict[str, object],
    reason: str,
    requests: int,
) -> None:
    server.push(*replies)
    conv = fixture("session.jsonl")
    logged: list[str] = []
    spec = get_stage("summarize")
    settings = {
        "summarizer": "anthropic",
        "base_url": server.base_url,
        "max_tokens": 1000,
        "keep_tokens": 200,
        "timeout_seconds": 2.0,
        "max_retries": 0,
        **options,
    }
    offload = Preview("off")
    ctx = StageContext(TokenLedger(get_counter("approx")), offload, log=logged.append)
    result = spec.fn(conv, spec.options(**settings), ctx)
    assert result.conversation is conv
    assert result.counters == {"summarized": 0, "failures": 1}
    (note,) = result.notes
    assert note.startswith("summary failed, transcript left unchanged: Anthropic summary failed: ")
    assert reason in note
    assert logged == [f"summarize: {note}"]
    assert server.count("/v1/messages") == requests
    # Nothing was offloaded for a summary that never came.
    assert offload.files == {}


def test_anthropic_recovers_when_a_retry_succeeds(server: AnthropicServer) -> None:
    server.push(server_error(503), message("after a retry"))
    result = run_anthropic(server, fixture("session.jsonl"), max_retries=1)
    assert result.counters == {"summarized": 11, "failures": 0}
    assert result.conversation.messages[1].text.endswith("\nafter a retry")
    assert server.count("/v1/messages") == 2


def _long_history(parts: int) -> Conversation:
    """A user request and many tool rounds, each about 600 approx tokens."""
    messages = [Message("user", (Block(Kind.TEXT, "Audit every module."),), key=0)]
    for i in range(parts):
        messages.append(
            Message(
                "assistant", (_call(f"c{i}", "read_file", {"path": f"m{i}.py"}),), key=2 * i + 1
            )
        )
        messages.append(
            Message(
                "tool", (_result(f"c{i}", f"module {i} " + "source line " * 200),), key=2 * i + 2
            )
        )
    messages.append(Message("assistant", (Block(Kind.TEXT, "Audit done."),), key=2 * parts + 1))
    return Conversation(tuple(messages))


def test_anthropic_long_history_is_summarized_in_chunks(server: AnthropicServer) -> None:
    def answer(request: Request) -> Reply:
        part = re.search(r"This is part (\d+) of", request.prompt)
        if part:
            return message(f"summary of part {part.group(1)}")
        merged = re.findall(r"summary of part (\d+)", request.prompt)
        return message("merged " + ",".join(merged))

    server.handler = answer
    conv = _long_history(12)
    result = run_anthropic(
        server,
        conv,
        trigger="always",
        keep_tokens=None,
        keep_messages=1,
        chunk_tokens=2000,
        summary_max_tokens=200,
    )
    assert result.counters == {"summarized": 25, "failures": 0}
    prompts = [r.prompt for r in server.requests]
    parts = [p for p in prompts if "This is part " in p]
    assert len(parts) >= 4 and len(prompts) == len(parts) + 1
    assert "Merge them into one summary" in prompts[-1]
    # Every request fits the chunk budget (approx: 4 characters a token).
    assert all(len(p) / 4 <= 2000 + 50 for p in prompts)
    # Every message went into some part, in order.
    assert all(f"module {i} " in "\n".join(parts) for i in range(12))
    assert parts[0].startswith(f"This is part 1 of {len(parts)} of the transcript;")
    body = result.conversation.messages[0].text.split("\n", 1)[1]
    assert body == "merged " + ",".join(str(i) for i in range(1, len(parts) + 1))


def test_anthropic_replies_are_cached(server: AnthropicServer, tmp_path: Path) -> None:
    from ctxcli.services.answer_cache import AnswerCache
    from ctxcli.services.anthropic_client import AnthropicAccess

    services = {
        "anthropic": AnthropicAccess("test-key", server.base_url),
        "answers": AnswerCache(tmp_path / "cache"),
    }
    server.push(message("cached summary"))
    conv = fixture("session.jsonl")
    first = run(conv, services=services, summarizer="anthropic", max_tokens=1000, keep_tokens=200)
    second = run(conv, services=services, summarizer="anthropic", max_tokens=1000, keep_tokens=200)
    assert first.conversation.messages[1].text == second.conversation.messages[1].text
    assert server.count("/v1/messages") == 1


def test_anthropic_end_to_end_through_the_api(
    server: AnthropicServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    server.push(message("what happened so far"))
    source = copy_fixture(tmp_path, "session.jsonl")
    out = reduce(
        tmp_path,
        source,
        [{"use": "summarize", "summarizer": "anthropic", "max_tokens": 1000, "keep_tokens": 200}],
    )
    assert json.loads(out.splitlines()[1])["content"].endswith("]\nwhat happened so far")
    # The rerun inside reduce() recognised its own summary: one request in all.
    assert server.count("/v1/messages") == 1
