"""`ctx reduce --preset claude-code-resume` on real Claude Code sessions, against cozempic.

cozempic 1.8.39 (a lossy pruner) on cc_spotter_4d5611e5.jsonl: 3,158,801 bytes ->
288,369 ("standard") / 240,170 ("aggressive"); cl100k tokens after the last compact
boundary 51,375 -> 25,308 ("standard"). ctx must give a file at most as large as
the aggressive one and send at most as many tokens on resume as the standard one,
while losing nothing: byte-exact restore, a valid session, no empty assistant record.

The run is the one a user makes in the session's directory (``-o out.jsonl``), so
the hints cite the short relative offload directory they would see.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli.core.usage import is_usage_stub
from ctxcli.formats import load
from ctxcli.formats.validate import validate_bytes
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import TokenLedger
from support.cli import invoke
from support.paths import SHARED, corpus

pytestmark = pytest.mark.slow

FILES = sorted(SHARED.glob("cc_*.jsonl")) if SHARED.is_dir() else []

# cozempic 1.8.39 on the same file: (aggressive bytes, standard tokens after the boundary).
COZEMPIC = {"cc_spotter_4d5611e5.jsonl": (240_170, 25_308)}


def resume_tokens(data: bytes, name: str) -> int:
    doc = load(data, name, on_invalid="keep")
    ledger = TokenLedger(get_counter("cl100k"))
    return sum(ledger.message(m) for m in doc.conversation.resumed_messages())


def empty_assistant_records(data: bytes) -> list[int]:
    empty = []
    for n, line in enumerate(data.splitlines(), start=1):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        message = rec.get("message") if isinstance(rec, dict) else None
        if rec.get("type") == "assistant" and isinstance(message, dict):
            if not message.get("content") and not is_usage_stub(rec):
                empty.append(n)
    return empty


@pytest.mark.parametrize("source", corpus(FILES, "a Claude Code session (cc_*.jsonl)"))
def test_resume_preset_on_a_real_session(source: Path) -> None:
    raw = source.read_bytes()
    args = ["--preset", "claude-code-resume", "--on-invalid", "keep"]
    result = invoke(["reduce", str(source), "-o", "out.jsonl", *args, "--json"])
    report = json.loads(result.stdout)["files"][0]
    out = Path("out.jsonl").read_bytes()

    # Exact figures: the report's numbers are the file's and a fresh count's.
    assert report["bytes_before"] == len(raw) and report["bytes_after"] == len(out)
    assert report["resume_tokens_before"] == resume_tokens(raw, source.name)
    assert report["resume_tokens_after"] == resume_tokens(out, "out.jsonl")
    print(
        f"\n{source.name}: bytes {len(raw):,} -> {len(out):,}; tokens after the last "
        f"compaction {report['resume_tokens_before']:,} -> {report['resume_tokens_after']:,}"
    )

    # Smaller than the session pruners, in bytes and in what a resume sends.
    assert len(out) < len(raw) / 2
    assert report["resume_tokens_after"] < report["resume_tokens_before"]
    if source.name in COZEMPIC:
        aggressive_bytes, standard_tokens = COZEMPIC[source.name]
        # Not counting the usage stubs, which keep the spend history cozempic erases.
        stubs = sum(len(line) + 1 for line in out.splitlines() if is_usage_stub(json.loads(line)))
        assert len(out) - stubs <= aggressive_bytes
        assert report["resume_tokens_after"] <= standard_tokens

    # Nothing lost, and still a session Claude Code can load.
    assert invoke(["restore", "out.jsonl", "-o", "-"]).stdout_bytes == raw
    before = {(p.kind, p.call_id) for p in validate_bytes(raw, on_invalid="keep")}
    after = {(p.kind, p.call_id) for p in validate_bytes(out, on_invalid="keep")}
    assert after <= before, after - before
    assert empty_assistant_records(out) == []

    # Idempotent: the reduced session reduces to itself.
    invoke(["reduce", "out.jsonl", "-o", "again.jsonl", *args, "-q"])
    assert Path("again.jsonl").read_bytes() == out
