"""Hints cite offload files by absolute path, on every route (issue 35 §3, first item).

A resumed agent's working directory is not the one ``ctx reduce`` ran in: a hint citing
``FILE.offload/clear/1`` relative to where ctx ran points nowhere for it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import orjson
import pytest

from ctxcli.api import Destination, stats
from support.cli import invoke
from support.paths import SAMPLE, SHARED

SUBAGENT = SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
CONFIG = 'tokenizer = "approx"\n[[stages]]\nuse = "truncate_tool_output"\nmax_length = 300\n'
# Paths the hints cite: whatever follows "saved to " or "cleared: " up to the hint's end.
CITED = re.compile(r"(?:saved to |cleared: )([^\s\]\"()（]+)")


def _cited(text: str) -> list[str]:
    return CITED.findall(text)


def _check(text: str, root: Path, elsewhere: Path) -> None:
    """Every path cited is absolute, under ``root``, and a file from another directory."""
    cited = _cited(text)
    assert cited, "the chain offloads something"
    os.chdir(elsewhere)
    for path in cited:
        assert Path(path).is_absolute(), path
        assert Path(path).is_relative_to(root.resolve()), path
        assert Path(path).is_file(), path


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """The transcript's directory, the working directory of the run, with a config."""
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(SAMPLE, work / "s.jsonl")
    (work / "ctx.toml").write_text(CONFIG)
    os.chdir(work)
    (tmp_path / "elsewhere").mkdir()
    return work


def test_a_relative_output_cites_its_offload_directory_absolutely(here: Path) -> None:
    invoke(["reduce", "s.jsonl", "-o", "out.jsonl"])
    _check((here / "out.jsonl").read_text(), here / "out.jsonl.offload", here.parent / "elsewhere")


def test_a_relative_offload_dir_is_cited_absolutely(here: Path) -> None:
    invoke(["reduce", "s.jsonl", "-o", "out.jsonl", "--offload-dir", "off"])
    _check((here / "out.jsonl").read_text(), here / "off", here.parent / "elsewhere")


def test_stdout_cites_its_offload_directory_absolutely(here: Path) -> None:
    out = invoke(["reduce", "s.jsonl"]).stdout
    _check(out, here / "ctx-offload", here.parent / "elsewhere")


def test_in_place_from_the_files_directory_cites_absolutely(here: Path) -> None:
    invoke(["reduce", "s.jsonl", "--in-place"])
    _check((here / "s.jsonl").read_text(), here / "s.jsonl.offload", here.parent / "elsewhere")


def test_a_preview_cites_what_reduce_writes(here: Path) -> None:
    report = stats("s.jsonl", Destination("out.jsonl"))
    invoke(["reduce", "s.jsonl", "-o", "out.jsonl"])
    assert (
        report.tokens_after
        == orjson.loads(
            invoke(["stats", "s.jsonl", "-o", "out.jsonl", "--json", "--no-cache"]).stdout
        )["tokens_after"]
    )
    assert str(here / "out.jsonl.offload") in (here / "out.jsonl").read_text()


@pytest.mark.real_data
def test_a_real_session_reduced_in_place_cites_absolutely(tmp_path: Path, here: Path) -> None:
    shutil.copy(SUBAGENT, here / "session.jsonl")
    invoke(["reduce", "session.jsonl", "--in-place", "--preset", "claude-code-resume"])
    text = (here / "session.jsonl").read_text()
    _check(text, here / "session.jsonl.offload", tmp_path / "elsewhere")
