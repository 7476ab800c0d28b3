"""One answer per question: the library and the CLI, stats and reduce, agree.

Each test pins a disagreement found on main (7387e41): two routes that answered the
same question differently.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from support.cli import invoke
from support.paths import SAMPLE
from support.session_layout import CC_MCLAUDE, CC_SPOTTER, Layout, age, build


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    return build(tmp_path / "home", monkeypatch)


def test_library_restore_of_a_repaired_then_reduced_session_is_the_original(
    layout: Layout, tmp_path: Path
) -> None:
    from ctxcli import restore_file

    original = layout.mclaude.read_bytes()
    invoke(["doctor", "--session", CC_MCLAUDE[:4], "--fix"])
    repaired = layout.mclaude.read_bytes()
    assert repaired != original
    age(layout.mclaude, 3600)
    invoke(["reduce", "--session", CC_MCLAUDE[:4], "--in-place"])
    assert layout.mclaude.read_bytes() not in (original, repaired)
    # The library and the command give the same bytes: the original, not the repair.
    assert restore_file(layout.mclaude, tmp_path / "lib") == original
    assert (tmp_path / "lib").read_bytes() == original
    invoke(["restore", str(layout.mclaude), "-o", str(tmp_path / "cli")])
    assert (tmp_path / "cli").read_bytes() == original


def _tokens_after(args: list[str]) -> int:
    return int(orjson.loads(invoke(args).stdout)["tokens_after"])


def test_stats_by_tool_counts_the_run_that_reduce_makes(tmp_path: Path) -> None:
    out = str(tmp_path / "out" / "reduced.jsonl")
    plain = _tokens_after(["stats", str(SAMPLE), "-o", out, "--json"])
    by_tool = _tokens_after(["stats", str(SAMPLE), "-o", out, "--json", "--by-tool"])
    top = _tokens_after(["stats", str(SAMPLE), "-o", out, "--json", "--top", "3"])
    reduced = _tokens_after(["reduce", str(SAMPLE), "-o", out, "--json"])
    assert plain == by_tool == top == reduced


def test_stats_of_a_session_in_place_previews_the_reduce_in_place(layout: Layout) -> None:
    chain = ["--preset", "claude-code-resume"]
    preview = orjson.loads(
        invoke(["stats", "--session", CC_SPOTTER[:4], "--in-place", "--json", *chain]).stdout
    )
    done = orjson.loads(
        invoke(["reduce", "--session", CC_SPOTTER[:4], "--in-place", "--json", *chain]).stdout
    )
    assert preview["tokens_after"] == done["tokens_after"]
    assert preview["files"][0]["offload_dir"] == done["files"][0]["offload_dir"]
