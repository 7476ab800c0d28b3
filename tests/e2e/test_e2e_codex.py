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
import os
import subprocess
import sys
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


def _saving(rollout: Path, out: Path, tokens: int) -> Path:
    """``rollout`` whose last token_count saves a context of ``tokens``."""
    lines = rollout.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"token_count"' in line)
    data = json.loads(lines[last])
    data["payload"]["info"]["last_token_usage"]["total_tokens"] = tokens
    lines[last] = (json.dumps(data, separators=(",", ":")) + "\n").encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(lines))
    return out


def _window(rollout: Path) -> int:
    line = [x for x in rollout.read_bytes().splitlines() if b'"token_count"' in x][-1]
    return int(json.loads(line)["payload"]["info"]["model_context_window"])


def _inflated(rollout: Path, out: Path) -> Path:
    """``rollout`` whose last token_count states 95% of the context window."""
    return _saving(rollout, out, int(_window(rollout) * 0.95))


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


def test_doctor_fixes_an_impossible_token_count_so_codex_resumes_without_compacting(
    tmp_path: Path,
) -> None:
    """openai/codex#24089: a saved context above the window compacts a short history.

    Codex compacts before the first turn of a resume from 18/19 of the recorded window
    (90% of the model's) on, the limit the ``codex_stale_token_count`` rule uses;
    ``ctx doctor --fix`` sets the figure to the history's estimate and the resume sends
    no compaction; ``ctx restore`` gives the rollout back byte for byte.
    """
    rollout = min(ROLLOUTS, key=lambda p: p.stat().st_size)
    limit = _window(rollout) * 18 // 19
    under = resume_codex(
        tmp_path / "under", _saving(rollout, tmp_path / "u" / rollout.name, limit - 1)
    )
    at = resume_codex(tmp_path / "at", _saving(rollout, tmp_path / "a" / rollout.name, limit))
    assert _compactions(under) == 0 and _compactions(at) == 1, (under.describe(), at.describe())

    path = _saving(rollout, tmp_path / "doctor" / rollout.name, 600_000)
    raw = path.read_bytes()
    before = resume_codex(tmp_path / "orig", path)
    assert _compactions(before) == 1, before.describe()
    env = {**os.environ, "CTX_DATA_DIR": str(tmp_path / "data"), "CTX_NO_PLUGINS": "1"}
    ctx = [sys.executable, "-m", "ctxcli"]
    found = subprocess.run([*ctx, "doctor", str(path), "--json"], capture_output=True, env=env)
    kinds = [p["kind"] for p in json.loads(found.stdout)["files"][0]["problems"]]
    assert kinds == ["codex_stale_token_count"], found.stdout
    subprocess.run([*ctx, "doctor", str(path), "--fix", "--force"], check=True, env=env)
    after = resume_codex(tmp_path / "fixed", path)
    after.accepted_turn(RESPONSES, "after doctor --fix")
    assert _compactions(after) == 0, after.describe()
    subprocess.run([*ctx, "restore", str(path), "--in-place"], check=True, env=env)
    assert path.read_bytes() == raw
