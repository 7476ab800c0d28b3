"""``ctx report`` on a file of several trajectories picks one with ``--trajectory N|ID``.

Issue 41 (small things): the report said "report one of them" and offered no way to.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import invoke
from support.openhands import instance


@pytest.fixture
def output(tmp_path: Path) -> Path:
    path = tmp_path / "output.jsonl"
    rows = [instance(seed, steps=4) for seed in range(3)]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return path


def test_the_error_names_the_option_and_the_trajectories(output: Path, tmp_path: Path) -> None:
    err = invoke(["report", str(output), "-o", str(tmp_path / "r.html")], code=2).stderr
    assert "holds 3 trajectories (openhands_output: org__repo-1000, org__repo-1001, " in err
    assert "pick one with --trajectory N (1 for the first) or --trajectory ID" in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(("which", "line"), [("1", 1), ("3", 3), ("org__repo-1001", 2)])
def test_a_trajectory_is_picked_by_number_or_id(
    which: str, line: int, output: Path, tmp_path: Path
) -> None:
    page = tmp_path / "r.html"
    err = invoke(["report", str(output), "-o", str(page), "--trajectory", which]).stderr
    assert f"{output}:{line}: report in {page}" in err
    assert page.stat().st_size > 0


@pytest.mark.parametrize("which", ["0", "4", "nope"])
def test_a_trajectory_that_is_not_there_is_named(which: str, output: Path, tmp_path: Path) -> None:
    err = invoke(
        ["report", str(output), "-o", str(tmp_path / "r.html"), "--trajectory", which], code=2
    ).stderr
    assert f"no trajectory is {which!r}: it holds 3 (openhands_output), numbered 1 to 3" in err
    assert "ids: org__repo-1000, org__repo-1001, org__repo-1002" in err


def test_one_transcript_has_no_trajectory_to_pick(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    err = invoke(["report", str(path), "-o", "-", "--trajectory", "1"], code=2).stderr
    assert "holds one transcript: there is no trajectory '1' to pick" in err
