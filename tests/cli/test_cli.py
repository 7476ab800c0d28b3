"""The CLI as CI runs it: exit codes, stdout carries only the payload, errors on stderr."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from support.cli import invoke
from support.paths import SAMPLE, SHARED

SMALL = """[[stages]]
use = "truncate_tool_output"
max_chars = 500
"""


def _copy_sample(dst: Path) -> Path:
    target = dst / "session.jsonl"
    target.write_bytes(SAMPLE.read_bytes())
    return target


def test_reduce_writes_output_and_offload(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["reduce", str(src), "-o", "out.jsonl"])
    assert result.stdout == ""
    assert "tokens" in result.stderr
    assert Path("out.jsonl").stat().st_size < src.stat().st_size
    assert (Path("out.jsonl.offload") / "manifest.json").is_file()


def test_reduce_to_stdout_carries_only_jsonl(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["reduce", str(src)])
    lines = result.stdout_bytes.splitlines()
    assert lines and all(json.loads(line)["role"] for line in lines)
    # Output to stdout: one directory per input and chain (by their hashes) under ./ctx-offload.
    (manifest,) = Path("ctx-offload").glob("*/manifest.json")
    input_hash, chain_hash = manifest.parent.name.split("-")
    assert input_hash == hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    assert len(chain_hash) == 8


def test_reduce_from_stdin_pipe(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    result = invoke(["reduce", "-", "--offload-dir", "off"], input=data)
    assert 0 < len(result.stdout_bytes) < len(data)
    restored = invoke(["restore", "-", "--offload-dir", "off"], input=result.stdout_bytes)
    assert restored.stdout_bytes == data


def test_reduce_json_report(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["reduce", str(src), "-o", "out.jsonl", "--json"])
    report = json.loads(result.stdout)["files"][0]
    assert report["format"] == "openai_chat"
    assert report["tokens_after"] < report["tokens_before"]
    assert result.stderr == ""


def test_quiet_prints_nothing(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["reduce", str(src), "-o", "out.jsonl", "-q"])
    assert result.stdout == "" and result.stderr == ""


def test_stats_json_keys_and_no_writes(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["stats", str(src), "--json"])
    report = json.loads(result.stdout)["files"][0]
    for key in (
        "format",
        "tokenizer",
        "messages",
        "tokens_before",
        "tokens_after",
        "bytes_before",
        "bytes_after",
        "stages",
    ):
        assert key in report
    for stage in report["stages"]:
        assert {"stage", "changed", "offloaded", "tokens_before", "tokens_after"} <= set(stage)
    assert list(Path.cwd().iterdir()) == []


def test_stats_table_on_stderr(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["stats", str(src)])
    assert result.stdout == ""
    assert "truncate_tool_output" in result.stderr and "total" in result.stderr


def test_stats_matches_reduce(tmp_path: Path) -> None:
    """stats runs the very pipeline reduce runs: same numbers, nothing written."""
    src = _copy_sample(tmp_path)
    Path("ctx.toml").write_text('offload_dir = "off"\n')
    stats = json.loads(invoke(["stats", str(src), "--json"]).stdout)["files"][0]
    reduced = json.loads(invoke(["reduce", str(src), "-o", "x.jsonl", "--json"]).stdout)["files"][0]
    for key in ("tokens_before", "tokens_after", "bytes_before", "bytes_after", "stages"):
        assert stats[key] == reduced[key], key


@pytest.mark.parametrize(("gate", "code"), [(10**9, 0), (10, 1)])
def test_stats_fail_over_gate(tmp_path: Path, gate: int, code: int) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["stats", str(src), "--json", "--fail-over", str(gate)], code=code)
    assert json.loads(result.stdout)["tokens_after"] > 0
    if code:
        assert "exceed --fail-over" in result.stderr


def test_restore_roundtrip(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    Path("ctx.toml").write_text(SMALL)
    invoke(["reduce", str(src), "-o", "out.jsonl"])
    invoke(["restore", "out.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == src.read_bytes()


def test_not_json_line_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "hi"}\n{oops\n')
    result = invoke(["reduce", str(bad), "-o", "out.jsonl"], code=2)
    assert result.stdout == ""
    assert result.stderr.startswith(f"ctx: error: {bad}:2: not valid JSON")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not Path("out.jsonl").exists() and not Path("out.jsonl.offload").exists()
    assert not list(Path.cwd().iterdir())


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = invoke(["stats", str(empty)], code=2)
    assert f"ctx: error: {empty}: the transcript is empty" in result.stderr


def test_record_that_is_not_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "hi"}\n[1, 2]\n')
    result = invoke(["reduce", str(bad), "--format", "openai_chat"], code=2)
    assert f"{bad}:2:" in result.stderr and "Traceback" not in result.stderr


def test_missing_input_file() -> None:
    result = invoke(["stats", "nope.jsonl"], code=2)
    assert result.stderr == "ctx: error: nope.jsonl: no such file\n"


def test_output_over_input_is_refused(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    before = src.read_bytes()
    result = invoke(["reduce", str(src), "-o", str(src)], code=2)
    assert "overwrite the input" in result.stderr
    assert src.read_bytes() == before


def test_bad_config_exit_2(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    Path("ctx.toml").write_text('[[stages]]\nuse = "truncate_tool_outptu"\n')
    result = invoke(["stats", str(src)], code=2)
    assert "did you mean 'truncate_tool_output'" in result.stderr


def test_unknown_tokenizer_flag(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    result = invoke(["stats", str(src), "--tokenizer", "gpt2"], code=2)
    assert "tokenizer" in result.stderr and "Traceback" not in result.stderr


def test_approx_tokenizer(tmp_path: Path) -> None:
    src = _copy_sample(tmp_path)
    report = json.loads(invoke(["stats", str(src), "--tokenizer", "approx", "--json"]).stdout)
    report = report["files"][0]
    assert report["tokenizer"] == "approx"
    assert report["tokens_before"] == pytest.approx(len(src.read_text()) / 4, rel=0.3)


def test_stages_list_and_detail() -> None:
    listing = invoke(["stages"]).stdout
    assert "truncate_tool_output" in listing and "clear_tool_results" in listing
    detail = invoke(["stages", "clear_tool_results"]).stdout
    assert "keep_rounds = 1" in detail and "max_tokens = 30000" in detail
    invoke(["stages", "nope"], code=2)


def test_init_writes_loadable_config() -> None:
    invoke(["init"])
    from ctxcli.pipeline.config import load_config

    config = load_config(Path("ctx.toml"))
    assert [s.use for s in config.stages] == ["truncate_tool_output", "clear_tool_results"]
    invoke(["init"], code=2)


def test_version() -> None:
    from ctxcli._version import __version__

    assert invoke(["--version"]).stdout.strip() == f"ctx {__version__}"


def test_validate_reports_orphans(tmp_path: Path) -> None:
    f = tmp_path / "orphan.jsonl"
    f.write_text(
        '{"role": "user", "content": "hi"}\n'
        '{"role": "tool", "tool_call_id": "call_9", "content": "lost"}\n'
        '{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", '
        '"function": {"name": "x", "arguments": "{}"}}]}\n'
        '{"role": "assistant", "content": "done"}\n'
    )
    result = invoke(["validate", str(f)], code=1)
    assert f"{f}:2: tool result 'call_9' has no matching tool call" in result.stderr
    assert f"{f}:3: tool call 'c1' (x) has no result" in result.stderr


@pytest.mark.real_data
def test_taubench_done_when(tmp_path: Path) -> None:
    """Issue 2's acceptance run on the real tau-bench transcript, through a pipe too."""
    src = SHARED / "oai_taubench_airline_task2_trial1.jsonl"
    Path("ctx.toml").write_text(SMALL)
    report = json.loads(invoke(["reduce", str(src), "-o", "out.jsonl", "--json"]).stdout)
    assert report["tokens_after"] < report["tokens_before"]
    assert any(Path("out.jsonl.offload/trunc").iterdir())
    invoke(["restore", "out.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == src.read_bytes()
    invoke(["reduce", "out.jsonl", "-o", "again.jsonl", "-q"])
    assert Path("again.jsonl").read_bytes() == Path("out.jsonl").read_bytes()
    piped = invoke(["reduce", "-", "--offload-dir", "pipe-offload", "-q"], input=src.read_bytes())
    assert len(piped.stdout_bytes) < src.stat().st_size
    back = invoke(["restore", "-", "--offload-dir", "pipe-offload"], input=piped.stdout_bytes)
    assert back.stdout_bytes == src.read_bytes()
