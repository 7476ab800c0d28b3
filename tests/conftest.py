"""Shared fixtures: every test runs isolated from the user's environment."""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3_server import _moto, s3  # noqa: F401  (fixtures: the loopback S3 server)

REPO = Path(__file__).resolve().parent.parent
# The real transcripts beside the checkout (CTX_SHARED_TRANSCRIPTS points elsewhere: the tests
# of the guard below use it to stand for a clone without them).
SHARED = Path(os.environ.get("CTX_SHARED_TRANSCRIPTS") or REPO.parent / "shared" / "transcripts")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


REQUIRE_SHARED = "CTX_REQUIRE_SHARED"
"""Set to 1 (as .ci/run does) and a test that needs the real transcripts fails without them."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="Rewrite expected outputs of the golden cases instead of comparing.",
    )


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No API key, no plugins, a private cache, and a clean working directory."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CTX_NO_PLUGINS", "1")
    monkeypatch.setenv("CTX_CACHE_DIR", str(tmp_path / ".ctx-cache"))
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / ".ctx-data"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


# --- the real transcripts in ../shared/transcripts ------------------------------------------
# They are third-party files that must not be copied into the repository, so a clone may not
# have them. Every test that reads them goes through need_shared(): the `real_data` marker,
# the `shared` fixture and the corpus() placeholder all call it. Without the corpus the test
# skips with one line, or fails when CTX_REQUIRE_SHARED=1 (CI), so it never skips silently.


def need_shared() -> Path:
    """``../shared/transcripts``; skip the test without it (fail under CTX_REQUIRE_SHARED=1)."""
    if SHARED.is_dir():
        return SHARED
    if os.environ.get(REQUIRE_SHARED, "") not in ("", "0"):
        pytest.fail(
            f"{SHARED} is missing and {REQUIRE_SHARED}=1: this test needs it", pytrace=False
        )
    pytest.skip(f"needs the real transcripts in {SHARED} (absent in this clone)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``real_data`` need the corpus; a corpus() placeholder fails if it has one."""
    marks = list(item.iter_markers("real_data"))
    if not marks:
        return
    need_shared()
    for mark in marks:
        if "none_match" in mark.kwargs:
            pytest.fail(f"no file in {SHARED} is {mark.kwargs['none_match']}", pytrace=False)


@pytest.fixture
def shared() -> Path:
    """``../shared/transcripts``, through need_shared()."""
    return need_shared()


def shared_transcripts() -> list[Path]:
    """The real transcripts in ../shared/transcripts (empty when absent)."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.iterdir() if p.is_file() and p.suffix != ".md")


def corpus(paths: Sequence[Path], what: str = "a transcript") -> list[Any]:
    """Parameters over real transcripts, never an empty list (pytest would collect nothing).

    Without ../shared the one placeholder skips (fails under CTX_REQUIRE_SHARED=1); with it,
    an empty ``paths`` fails, naming ``what`` was looked for.
    """
    if paths:
        return [pytest.param(p, id=p.name, marks=pytest.mark.real_data) for p in paths]
    return [no_corpus(what)]


def no_corpus(what: str, arity: int = 1) -> Any:
    """The parameter set that stands for an empty corpus (``arity`` values, all None)."""
    marks = pytest.mark.real_data(none_match=what)
    return pytest.param(*([None] * arity), id="no-real-transcripts", marks=marks)


def invoke(args: list[str], *, code: int = 0, input: bytes | str | None = None) -> Any:
    """Run the CLI like CI does; assert the exit code and show both streams on failure."""
    from ctxcli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, args, input=input, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        traceback.print_exception(result.exception)
        raise result.exception
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result
