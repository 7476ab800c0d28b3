"""Golden cases: tests/cases/<stage>/<case>/{config.toml,input.jsonl,expected.jsonl,stats.json}.

Each case is reduced with its config; the output must equal expected.jsonl and the
stats must equal stats.json. Every case is also re-reduced (nothing may change),
restored (byte-for-byte) and validated (no orphaned calls or results).
Regenerate with ``pytest tests/stages/test_cases.py --update-goldens`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxcli.api import Destination, reduce, restore_file
from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import load_config
from support.paths import CASES

ALL = sorted(p.parent for p in CASES.glob("*/*/config.toml"))


def _stats_view(report: dict[str, object]) -> dict[str, object]:
    keep = (
        "format",
        "tokenizer",
        "messages",
        "tokens_before",
        "tokens_after",
        "bytes_before",
        "bytes_after",
    )
    view = {k: report[k] for k in keep}
    view["stages"] = [
        {
            k: s[k]
            for k in ("stage", "changed", "offloaded", "tokens_before", "tokens_after", "counters")
            if k in s
        }
        for s in report["stages"]  # type: ignore[attr-defined]
    ]
    return view


@pytest.mark.parametrize("case", ALL, ids=[f"{p.parent.name}/{p.name}" for p in ALL])
def test_case(case: Path, tmp_path: Path, update_goldens: bool) -> None:
    config = load_config(case / "config.toml")
    source = tmp_path / "input.jsonl"
    source.write_bytes((case / "input.jsonl").read_bytes())
    out = tmp_path / "out.jsonl"
    # Hints cite the offload directory's absolute path; citing it as a fixed relative
    # name keeps the hint paths in expected.jsonl stable.
    dest = Destination(str(out), "ctx-offload", cite_as="ctx-offload")
    done = reduce(source, dest, config=config)
    report, data = done.report, done.output
    stats = _stats_view(report.to_dict())
    expected, expected_stats = case / "expected.jsonl", case / "stats.json"
    if update_goldens:
        expected.write_bytes(data)
        expected_stats.write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
    assert data == expected.read_bytes()
    assert stats == json.loads(expected_stats.read_text())

    # Lossless: the offload directory rebuilds the input exactly.
    assert restore_file(out, offload_dir="ctx-offload") == source.read_bytes()
    # Idempotent: reducing the output again changes nothing.
    again = reduce(out, Destination(str(tmp_path / "again.jsonl"), "again-offload"), config=config)
    assert again.output == data
    # Valid: no call without its result, no result without its call.
    assert validate_bytes(data, str(out)) == []


def test_every_stage_has_a_noop_case() -> None:
    """Every registered stage has golden cases: one where it changes nothing, one where it acts."""
    from ctxcli.stages import registry

    for name in registry():
        cases = sorted(p.name for p in (CASES / name).glob("*/config.toml") for p in [p.parent])
        noops = [c for c in cases if "noop" in c]
        assert noops, f"{name} has no no-op case under tests/cases/{name}/"
        assert len(cases) > len(noops), f"{name} has no case where it acts"
        for case in noops:
            folder = CASES / name / case
            same = (folder / "expected.jsonl").read_bytes() == (folder / "input.jsonl").read_bytes()
            assert same, f"{name}/{case} is a no-op case whose output differs from its input"
