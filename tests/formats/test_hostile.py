"""Hostile inputs, for every format: a one-line error (exit 2) or a lossless pass-through."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.formats import registry
from ctxcli.formats.validate import validate_bytes
from hostile.corpus import LINE_FORMATS, Case, cases
from support.cli import invoke

CONFIG = """[[stages]]
use = "truncate_tool_output"
max_chars = 600
[[stages]]
use = "clear_tool_results"
max_tokens = 100
"""

ALL = [(fmt, case) for fmt in LINE_FORMATS for case in cases(fmt)]


@pytest.mark.parametrize(("fmt", "case"), ALL, ids=[f"{f}-{c.name}" for f, c in ALL])
def test_hostile(fmt: str, case: Case, tmp_path: Path) -> None:
    # A lost format must fail here, not pass as an "expected" usage error.
    assert fmt in registry(), f"format {fmt} is no longer registered"
    src = tmp_path / f"{case.name}.jsonl"
    src.write_bytes(case.data)
    Path("ctx.toml").write_text(CONFIG)
    args = ["reduce", str(src), "-o", "out.jsonl", "--format", fmt, "--on-invalid", case.on_invalid]
    from typer.testing import CliRunner

    from ctxcli.cli import app

    result = CliRunner().invoke(app, args)
    assert "Traceback" not in result.stderr
    assert result.exit_code in (0, 2), result.stderr
    if case.expect == "error" or (case.expect == "either" and result.exit_code == 2):
        assert result.exit_code == 2, result.stderr
        lines = [
            ln for ln in result.stderr.strip().splitlines() if not ln.startswith("ctx: config ")
        ]
        assert len(lines) == 1 and lines[0].startswith("ctx: error: "), result.stderr
        where = f"{src}:{case.line}:" if case.line is not None else f"{src}:"
        assert where in lines[0], lines[0]
        assert not Path("out.jsonl").exists() and not Path("out.jsonl.offload").exists()
        assert src.read_bytes() == case.data
        return
    assert result.exit_code == 0, result.stderr
    if case.warn:
        assert "ctx: warning:" in result.stderr and f"{src}:" in result.stderr
    out = Path("out.jsonl").read_bytes()
    restored = invoke(["restore", "out.jsonl", "-o", "-"]).stdout_bytes
    assert restored == case.data
    again = [
        "reduce",
        "out.jsonl",
        "-o",
        "again.jsonl",
        "--format",
        fmt,
        "--on-invalid",
        case.on_invalid,
        "-q",
    ]
    invoke(again)
    assert Path("again.jsonl").read_bytes() == out
    if case.on_invalid == "error":
        before = {(p.kind, p.call_id) for p in validate_bytes(case.data, format=fmt)}
        after = {(p.kind, p.call_id) for p in validate_bytes(out, format=fmt)}
        assert after <= before
    off = Path("out.jsonl.offload").resolve()
    for path in off.rglob("*"):
        assert path.resolve().is_relative_to(off)
        assert len(path.name) <= 120


@pytest.mark.slow
def test_hundred_megabyte_single_line(tmp_path: Path) -> None:
    """One 100 MB tool output on one line: reduced, restored, in bounded time."""
    src = tmp_path / "huge.jsonl"
    big = "x" * 100_000_000
    with src.open("w") as fh:
        fh.write('{"role": "user", "content": "go"}\n')
        fh.write(
            '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", '
            '"type": "function", "function": {"name": "run", "arguments": "{}"}}]}\n'
        )
        fh.write('{"role": "tool", "tool_call_id": "c1", "content": "' + big + '"}\n')
    del big
    Path("ctx.toml").write_text('tokenizer = "approx"\n' + CONFIG)
    invoke(["reduce", str(src), "-o", "out.jsonl", "-q"])
    assert Path("out.jsonl").stat().st_size < 10_000
    invoke(["restore", "out.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").stat().st_size == src.stat().st_size
