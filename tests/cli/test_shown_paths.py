"""What ctx prints for a person names paths as the user reaches them (issue 45).

Under the working directory a path is printed relative to it, under HOME from ``~``,
elsewhere whole: the same run prints the same text wherever it runs. Only the rendering
changes: ``--json`` payloads and the hints written into a transcript keep absolute paths
(the agent reading a hint runs elsewhere).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxcli.cli.console import shown_path
from support.cli import invoke
from support.paths import SAMPLE


def test_a_path_is_shown_from_here_then_from_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, home = tmp_path / "work", tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert shown_path(here / "out.jsonl.offload") == "out.jsonl.offload"
    assert shown_path(str(here / "a" / "b")) == os.path.join("a", "b")
    assert shown_path(here) == "."
    assert shown_path(home / ".claude" / "x.jsonl") == "~/.claude/x.jsonl"
    assert shown_path(home) == "~"
    # A sibling is not under the working directory, whatever its name begins with.
    assert shown_path(tmp_path / "work2" / "f") == str(tmp_path / "work2" / "f")
    assert shown_path("/elsewhere/f") == "/elsewhere/f"
    assert shown_path("given/as.jsonl") == "given/as.jsonl"
    assert shown_path("s3://bucket/run") == "s3://bucket/run"


def test_a_path_under_here_and_home_is_shown_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the working directory is under HOME
    assert shown_path(tmp_path / "work" / "f") == "f"
    assert shown_path(tmp_path / "other" / "f") == "~/other/f"
    monkeypatch.setenv("HOME", str(tmp_path / "work"))  # the working directory is HOME
    assert shown_path(tmp_path / "work" / "f") == "f"


def test_a_home_under_here_is_shown_from_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A HOME set under the working directory (as docs/sessions.md does) reads as ``~``."""
    monkeypatch.setenv("HOME", str(tmp_path / "work" / "scratch-home"))
    assert shown_path(tmp_path / "work" / "scratch-home" / ".claude") == "~/.claude"
    assert shown_path(tmp_path / "work" / "f") == "f"


def test_reduce_and_restore_print_relative_paths_json_and_hints_keep_absolute(
    tmp_path: Path,
) -> None:
    src = tmp_path / "work" / "session.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    out = tmp_path / "work" / "out.jsonl"
    err = invoke(["reduce", str(src), "-o", str(out)]).stderr
    assert err.startswith("ctx: session.jsonl: ")
    assert err.endswith("; offload in out.jsonl.offload\n")
    assert str(tmp_path) not in err
    restored = invoke(["restore", str(out), "-o", "back.jsonl"]).stderr
    assert restored.startswith("ctx: out.jsonl: restored ")
    assert restored.endswith(" from out.jsonl.offload\n")
    # The hints the agent reads name the directory whole; so does the JSON payload.
    assert f"{out}.offload/".encode() in out.read_bytes()
    payload = json.loads(invoke(["reduce", str(src), "-o", str(out), "--json"]).stdout)
    assert payload["files"][0]["offload_dir"] == f"{out}.offload"


def test_a_path_outside_here_is_printed_whole(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    src = elsewhere / "session.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    err = invoke(["reduce", str(src), "-o", str(elsewhere / "out.jsonl")]).stderr
    assert err.startswith(f"ctx: {src}: ")
    assert err.endswith(f"; offload in {elsewhere}/out.jsonl.offload\n")


def test_report_names_its_input_from_here(tmp_path: Path) -> None:
    src = tmp_path / "work" / "session.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    err = invoke(["report", str(src), "-o", "page.html", "--no-cost"]).stderr
    assert err.startswith("ctx: session.jsonl: report in page.html ")
