"""Shared fixtures: every test runs isolated from the user's environment."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "transcripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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


def shared_transcripts() -> list[Path]:
    """The real transcripts in ../shared/transcripts (empty when absent)."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.iterdir() if p.is_file() and p.suffix != ".md")


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
