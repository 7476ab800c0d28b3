"""CTX_NO_SKIPS=1 (CI) fails a skip, unless the test is marked may_skip; xfails stay xfails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

CASES = """
import pytest

def test_needs_a_tool():
    pytest.skip("chromium is not installed")

@pytest.mark.skipif(True, reason="no moto here")
def test_marked_skipif():
    pass

@pytest.mark.may_skip(reason="a platform this cannot run on")
def test_may_skip():
    pytest.skip("not on this platform")

@pytest.mark.xfail(strict=True, reason="known")
def test_known_failure():
    assert False

def test_runs():
    pass
"""


def _pytest(tmp_path: Path, no_skips: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTX_")}
    env["PYTHONPATH"] = str(REPO / "tests")
    if no_skips is not None:
        env["CTX_NO_SKIPS"] = no_skips
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "support.no_skips",
            "-p",
            "no:cacheprovider",
            "-rA",
            "--strict-markers",
            "test_cases.py",
        ],  # fmt: skip
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("value", [None, "0"], ids=["unset", "zero"])
def test_without_the_flag_a_skip_is_a_skip(tmp_path: Path, value: str | None) -> None:
    done = _pytest(tmp_path, value)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout
    assert "1 passed, 3 skipped, 1 xfailed" in summary, done.stdout


def test_with_the_flag_only_a_may_skip_test_skips(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "1")
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in summary, done.stdout
    assert "FAILED test_cases.py::test_needs_a_tool" in done.stdout
    assert "ERROR test_cases.py::test_marked_skipif" in done.stdout  # a skipif skips at setup
    assert "lets nothing skip: chromium is not installed" in done.stdout
    assert "lets nothing skip: no moto here" in done.stdout
    assert "SKIPPED [1] test_cases.py" in done.stdout and "not on this platform" in done.stdout
