"""The real Codex CLI resumes every real Codex rollout, original and reduced.

For each rollout in ../shared/transcripts the original and its ``codex-resume``
reduction are put into a fresh CODEX_HOME; ``codex exec resume ID ...`` runs against the
fake Responses API (built-in ``openai`` provider, ``openai_base_url`` on 127.0.0.1; the
WebSocket upgrade gets 426 so Codex uses HTTP). The client must exit 0 without a
compaction request, the server must accept the turn, and the tokens the reduction saved
in the request must match what ``ctx stats`` predicted (within 10 points of the
session's tokens); rollouts with tool calls must send a request at least 50% smaller.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import measure, reduced_copy, require, require_shared, resume_codex, shared

from support.fake_api import is_compaction
from support.paths import corpus

pytestmark = pytest.mark.e2e

RESPONSES = "/v1/responses"
ROLLOUTS = shared("codex_")


@pytest.fixture(autouse=True)
def _needs_client() -> None:
    require_shared()
    require("codex")


def _compactions(run) -> int:
    return sum(1 for r in run.requests if r.path.startswith(RESPONSES) and is_compaction(r.body))


def _has_tool_calls(path: Path) -> bool:
    return b'"function_call"' in path.read_bytes() or b'"custom_tool_call"' in path.read_bytes()


@pytest.mark.parametrize("rollout", corpus(ROLLOUTS, "a Codex rollout (codex_*)"))
def test_original_and_reduced_resume(rollout: Path, tmp_path: Path) -> None:
    reduced, stats = reduced_copy(rollout, "codex-resume", tmp_path)
    orig_run = resume_codex(tmp_path / "orig", rollout)
    red_run = resume_codex(tmp_path / "red", reduced)
    before = orig_run.accepted_turn(RESPONSES, "original")
    after = red_run.accepted_turn(RESPONSES, "reduced")
    assert _compactions(red_run) == 0, red_run.describe()
    b, a = measure(before), measure(after)
    counted = stats["tokens_before"]
    measured = (b.conversation_tokens - a.conversation_tokens) / counted
    predicted = (stats["tokens_before"] - stats["tokens_after"]) / counted
    smaller = 1 - a.body_bytes / b.body_bytes
    print(
        f"{rollout.name}: request {b.body_bytes:,} -> {a.body_bytes:,} bytes ({smaller:.1%} "
        f"smaller), conversation {b.conversation_tokens:,} -> {a.conversation_tokens:,} "
        f"tokens (saved {measured:.1%} of the session; ctx stats predicted {predicted:.1%})"
    )
    assert abs(measured - predicted) <= 0.10, (measured, predicted)
    if _has_tool_calls(rollout):
        assert smaller >= 0.50
    else:
        assert a.body_bytes <= b.body_bytes


def _inflated(rollout: Path, out: Path) -> Path:
    """``rollout`` whose last token_count states 95% of the context window."""
    lines = rollout.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"token_count"' in line)
    data = json.loads(lines[last])
    info = data["payload"]["info"]
    info["last_token_usage"]["total_tokens"] = int(info["model_context_window"] * 0.95)
    lines[last] = (json.dumps(data, separators=(",", ":")) + "\n").encode()
    out.write_bytes(b"".join(lines))
    return out


def test_a_stale_token_count_no_longer_compacts_after_codex_resume(tmp_path: Path) -> None:
    """Codex compacts first when the saved figure is over its limit; reduced, it does not."""
    rollout = max((p for p in ROLLOUTS if _has_tool_calls(p)), key=lambda p: p.stat().st_size)
    big = _inflated(rollout, tmp_path / rollout.name)
    orig_run = resume_codex(tmp_path / "orig", big)
    assert _compactions(orig_run) >= 1, orig_run.describe()
    reduced, _ = reduced_copy(big, "codex-resume", tmp_path)
    red_run = resume_codex(tmp_path / "red", reduced)
    red_run.accepted_turn(RESPONSES, "reduced")
    assert _compactions(red_run) == 0, red_run.describe()
