"""The manual (make docs-site): a page for every command and stage, and a nav that holds.

`mkdocs build --strict` itself runs in `make docs-site` (part of `make test-all`, so of CI):
it needs the `docs` extra, which the default test environment does not install.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.testing import CliRunner

from ctxcli.cli import app
from support.paths import REPO, load_script


def _gen_site() -> Any:
    return load_script("gen_site")


def test_every_listed_command_and_stage_has_its_page() -> None:
    pages = _gen_site().pages()
    runner = CliRunner()
    top = runner.invoke(app, ["--help"], terminal_width=80).stdout
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", top, re.M)
    assert {"reduce", "stats", "cost", "config"} <= set(listed)
    group = typer.main.get_command(app)
    assert set(listed) == set(group.commands)  # type: ignore[attr-defined]
    for name in listed:
        page = pages[f"commands/{name}.md"]
        assert page.startswith(f"# ctx {name}\n") and f"Usage: ctx {name}" in page
    config = pages["commands/config.md"]
    assert "## ctx config check" in config and "## ctx config schema" in config
    stages = runner.invoke(app, ["stages"], env={"CTX_NO_PLUGINS": "1"}).stdout
    for name in re.findall(r"^([a-z_]+) ", stages, re.M):
        page = pages[f"stages/{name}.md"]
        assert "## Options" in page and f'use = "{name}"' in page
        assert not re.search(r"(?<!`)``(?!`)", page), f"{name}: RST literal left in its page"
    presets = runner.invoke(app, ["presets"]).stdout
    for name in re.findall(r"^([a-z-]+) ", presets, re.M):
        assert "```toml" in pages[f"presets/{name}.md"]


def test_the_nav_names_every_page_and_only_pages_that_exist() -> None:
    nav = re.findall(r":\s+(\S+\.md)$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    generated = {f"reference/{p}" for p in _gen_site().pages() if p.endswith("index.md")}
    for page in nav:
        assert (REPO / "docs" / page).is_file() or page in generated, page
    written = {p.name for p in (REPO / "docs").glob("*.md")}
    assert written <= set(nav), written - set(nav)
