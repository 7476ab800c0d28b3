"""A strict mode CI can see (issue 41, small things): a stage that fell back fails the run.

A summarizer that cannot run (no key) falls back and the run exits 0 with a warning, as
the fail-safe design wants; ``--strict`` (reduce, stats) then exits 3 (API_ERROR) once the
output is written, and ``--json`` lists every fallback, strict or not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli import Destination, reduce, restore
from ctxcli.pipeline.config import load_config
from support.cli import invoke

SUMMARIZE = (
    '[[stages]]\nuse = "summarize"\nsummarizer = "anthropic"\ntrigger = "always"\n'
    "keep_messages = 1\n"
)
CLASSIFY = (
    '[[stages]]\nuse = "compress_words"\nclassifier = "anthropic"\nrecent_calls = 0\n'
    "include_assistant_text = true\n"
)


@pytest.fixture
def session() -> Path:
    lines = [
        {"role": ("user", "assistant")[i % 2], "content": f"step {i}: " + "word " * 60}
        for i in range(8)
    ]
    path = Path("s.jsonl")
    path.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    Path("summarize.toml").write_text(SUMMARIZE)
    return path


def test_a_fallback_exits_0_with_a_warning_and_3_when_strict(session: Path) -> None:
    args = ["reduce", str(session), "-c", "summarize.toml", "-o", "out.jsonl"]
    easy = invoke(args)
    assert "ctx: warning: summarize: summary failed" in easy.stderr
    Path("out.jsonl").unlink()
    strict = invoke([*args, "--strict"], code=3)
    assert (
        "ctx: error: s.jsonl: summarize fell back (summary failed, transcript left unchanged: "
        "ANTHROPIC_API_KEY is not set" in strict.stderr
    )
    # Fail-safe still: the output is written, and restores.
    assert restore("out.jsonl").data == session.read_bytes()
    invoke(["stats", str(session), "-c", "summarize.toml", "--strict"], code=3)


def test_json_lists_the_fallbacks_strict_or_not(session: Path) -> None:
    Path("classify.toml").write_text(CLASSIFY)
    payload = json.loads(invoke(["stats", str(session), "-c", "summarize.toml", "--json"]).stdout)
    ((fallback),) = payload["fallbacks"]
    assert fallback["input"] == "s.jsonl" and fallback["stage"] == "summarize"
    assert fallback["reason"].startswith("summary failed, transcript left unchanged")
    assert payload["files"][0]["stages"][0]["fallbacks"] == [fallback["reason"]]
    classified = json.loads(
        invoke(["stats", str(session), "-c", "classify.toml", "--json", "--strict"], code=3).stdout
    )
    assert [f["stage"] for f in classified["fallbacks"]] == ["compress_words"]
    assert "windows used the heuristic classifier" in classified["fallbacks"][0]["reason"]
    clean = json.loads(invoke(["stats", str(session), "--json", "--strict"]).stdout)
    assert clean["fallbacks"] == []


def test_a_batch_is_strict_too(session: Path) -> None:
    folder = Path("runs")
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (folder / name).write_bytes(session.read_bytes())
    result = invoke(["reduce", "runs", "-o", "out", "-c", "summarize.toml", "--strict"], code=3)
    assert result.stderr.count("summarize fell back") == 2
    assert (Path("out") / "a.jsonl").is_file() and (Path("out") / "b.jsonl").is_file()
    stats = invoke(["stats", "runs", "-c", "summarize.toml", "--strict", "--json"], code=3)
    assert len(json.loads(stats.stdout)["fallbacks"]) == 2


def test_the_library_reports_the_fallbacks(session: Path) -> None:
    done = reduce(session, Destination("out.jsonl"), config=load_config("summarize.toml"))
    ((stage, reason),) = done.report.fallbacks
    assert stage == "summarize" and "ANTHROPIC_API_KEY is not set" in reason
