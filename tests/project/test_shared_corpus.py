"""The tests on ../shared/transcripts skip without it, one line each, or fail under CI's flag.

Each case runs pytest on two of those tests (one plain, one parametrized over the corpus)
with CTX_SHARED_TRANSCRIPTS naming a directory that is missing or empty.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

TESTS = [
    "tests/cli/test_cli.py::test_taubench_done_when",
    "tests/api/test_mapped_input.py::test_real_transcripts_are_the_same_mapped",
]


def _pytest(corpus: Path, *, require: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTX_")}
    env["CTX_SHARED_TRANSCRIPTS"] = str(corpus)
    if require:
        env["CTX_REQUIRE_SHARED"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", "-m", "", *TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("require", [False, True], ids=["clone", "ci"])
def test_a_missing_corpus_skips_each_test_or_fails_it_in_ci(tmp_path: Path, require: bool) -> None:
    done = _pytest(tmp_path / "absent", require=require)
    summary = done.stdout.strip().splitlines()[-1]
    if require:  # reported at setup, so pytest counts errors, and exits 1 all the same
        assert done.returncode == 1 and "2 errors" in summary, done.stdout
        assert done.stdout.count(f"{tmp_path / 'absent'} is missing and CTX_REQUIRE_SHARED=1") == 2
    else:
        assert done.returncode == 0 and summary.startswith("2 skipped"), done.stdout
        reason = f"needs the real transcripts in {tmp_path / 'absent'} (absent in this clone)"
        assert re.search(
            rf"SKIPPED \[2\] tests/support/paths.py:\d+: {re.escape(reason)}", done.stdout
        )


def test_an_empty_corpus_fails_instead_of_collecting_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _pytest(tmp_path / "empty", require=False)
    assert done.returncode == 1, done.stdout
    assert f"no file in {tmp_path / 'empty'} is a transcript" in done.stdout
    assert "[no-real-transcripts]" in done.stdout
