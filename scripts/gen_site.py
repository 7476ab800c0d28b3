"""Write the generated pages of the docs site (`make docs-site` runs it before mkdocs).

From the code itself, so they cannot disagree with it:

- ``reference/commands/<command>.md``: one page per command of the Typer app (its
  subcommands on the same page), the help as a terminal 80 columns wide shows it;
- ``reference/stages/<stage>.md``: one page per stage of the registry: what it does, its
  options (type, default as TOML, description) and the ``[[stages]]`` table to paste;
- ``reference/presets/<preset>.md``: one page per preset, its ctx.toml;
- an index page for each.

They go to ``docs/reference/`` (not committed: .gitignore), or to ``--out DIR``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference"
# Generated text must not depend on who runs the generator: no plugins, no colour, 80 columns.
SITE_ENV = {"CTX_NO_PLUGINS": "1", "NO_COLOR": "1", "COLUMNS": "80"}


def _commands() -> list[tuple[str, Any, list[tuple[str, Any]]]]:
    """(name, command, [(subcommand name, subcommand)]) for every top-level command."""
    import typer

    from ctxcli.cli import app

    group = typer.main.get_command(app)
    found = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = list(getattr(command, "commands", {}).items())
        found.append((name, command, subs))
    return found


def _help(words: list[str]) -> str:
    from typer.testing import CliRunner

    from ctxcli.cli import app

    result = CliRunner().invoke(app, [*words, "--help"], prog_name="ctx", terminal_width=80)
    if result.exit_code != 0:
        raise SystemExit(f"ctx {' '.join(words)} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.stdout.rstrip().splitlines())


def command_pages() -> dict[str, str]:
    """``commands/<name>.md`` for every command, and ``commands/index.md``."""
    pages: dict[str, str] = {}
    rows = ["# Commands", "", "Every command of `ctx`, as `ctx --help` lists them.", ""]
    rows += ["| command | what it does |", "|---|---|"]
    for name, command, subs in _commands():
        summary = command.get_short_help_str(limit=1_000)
        rows.append(f"| [`ctx {name}`]({name}.md) | {_cell(summary)} |")
        text = [f"# ctx {name}", "", summary, "", "```text", _help([name]), "```", ""]
        for sub, _command in subs:
            text += [f"## ctx {name} {sub}", "", "```text", _help([name, sub]), "```", ""]
        pages[f"commands/{name}.md"] = "\n".join(text)
    pages["commands/index.md"] = "\n".join(rows) + "\n"
    return pages


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_LITERAL = re.compile(r"``(.+?)``", re.S)


def _markdown(doc: str) -> str:
    """A docstring as Markdown: ``x`` as `x`, paragraphs kept."""
    return _LITERAL.sub(r"`\1`", doc)


def stage_pages() -> dict[str, str]:
    """``stages/<name>.md`` for every built-in stage, and ``stages/index.md``."""
    from ctxcli.pipeline.schema import option_docs, stage_toml
    from ctxcli.stages import registry

    pages: dict[str, str] = {}
    rows = ["# Stages", "", "Every built-in stage, as `ctx stages` lists them.", ""]
    rows += ["| stage | what it does |", "|---|---|"]
    for spec in sorted(registry().values(), key=lambda s: s.name):
        if spec.package != "ctxcli":
            continue
        rows.append(f"| [`{spec.name}`]({spec.name}.md) | {_cell(spec.summary)} |")
        body = _markdown(spec.doc.split("\n", 1)[1].strip()) if "\n" in spec.doc else ""
        text = [f"# {spec.name}", "", _markdown(spec.summary), "", body, "", "## Options", ""]
        text += ["| option | type | default | what it does |", "|---|---|---|---|"]
        for doc in option_docs(spec):
            default = f"`{_cell(doc.default)}`" if doc.default is not None else "unset"
            text.append(
                f"| `{doc.name}` | `{_cell(doc.type)}` | {default} | {_cell(doc.description)} |"
            )
        text += [
            "",
            "## In ctx.toml",
            "",
            f"`ctx stages {spec.name}` prints this table at its defaults; paste it into",
            "`ctx.toml` and change what you need (`ctx config check` accepts it as it is).",
            "",
            "```toml",
            stage_toml(spec).rstrip(),
            "```",
            "",
        ]
        pages[f"stages/{spec.name}.md"] = "\n".join(text)
    pages["stages/index.md"] = "\n".join(rows) + "\n"
    return pages


def preset_pages() -> dict[str, str]:
    """``presets/<name>.md`` for every preset, and ``presets/index.md``."""
    from ctxcli.pipeline.presets import get_preset, preset_names

    pages: dict[str, str] = {}
    rows = ["# Presets", "", "Named stage chains, as `ctx presets` lists them.", ""]
    rows += ["| preset | what it is for |", "|---|---|"]
    for name in preset_names():
        preset = get_preset(name)
        rows.append(f"| [`{name}`]({name}.md) | {_cell(preset.summary)} |")
        pages[f"presets/{name}.md"] = "\n".join(
            [
                f"# {name}",
                "",
                preset.summary,
                "",
                f"Run it with `--preset {name}`, or start a config from it with",
                f"`ctx presets {name} > ctx.toml`:",
                "",
                "```toml",
                preset.text.rstrip(),
                "```",
                "",
            ]
        )
    pages["presets/index.md"] = "\n".join(rows) + "\n"
    return pages


def pages() -> dict[str, str]:
    """Every generated page, by its path under ``reference/``."""
    return {**command_pages(), **stage_pages(), **preset_pages()}


def write(out: Path) -> int:
    """Write the pages under ``out`` (replacing what a previous run left); how many."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    written = pages()
    for rel, text in written.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return len(written)


def main() -> int:
    """Write the generated pages."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the pages")
    args = parser.parse_args()
    os.environ.update(SITE_ENV)
    count = write(args.out)
    print(f"wrote {count} pages in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
