"""Shared fixtures: every test runs isolated from the user's environment.

The tests mirror the packages of ``src/ctxcli`` (``tests/store/`` tests ``ctxcli.store``;
``tests/project/`` checks the repository: README, docs, layering, packaging), with
``support/`` (helpers), ``cases/`` (golden cases), ``fixtures/`` and ``e2e/`` beside them.
The folders have no ``__init__.py`` and pytest imports in its default ``prepend`` mode,
so every test file's basename is unique (pytest refuses a second one): a package
``tests/datasets`` would shadow Hugging Face's ``datasets``, and the ``importlib`` mode
would make test modules unimportable by name (cloudpickle, and the few tests that import
a neighbour's helpers). This folder is on ``sys.path``, so ``support`` imports as a package.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.no_skips import (  # noqa: F401  (hooks: CTX_NO_SKIPS=1 in CI)
    pytest_configure,
    pytest_runtest_makereport,
)
from support.paths import SHARED, need_shared
from support.s3_server import _moto, s3  # noqa: F401  (fixtures: the loopback S3 server)


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


# --- the real transcripts in ../shared/transcripts (support/paths.py says how they are found) ---


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
