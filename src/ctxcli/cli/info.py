"""``ctx stages``, ``ctx presets`` and ``ctx init``: what ctx can do, and a config to start from."""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli import api
from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import JsonOpt
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import INIT_TEMPLATE
from ctxcli.pipeline.presets import get_preset, preset_names
from ctxcli.stages import StageSpec, get_stage, registry

__all__ = ["init", "presets", "stages"]


def stages(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Show one stage's documentation and options.",
            metavar="STAGE",
            autocompletion=lambda incomplete: [n for n in registry() if n.startswith(incomplete)],
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:
    """List the stages, or show one stage's documentation and options.

    One stage's options are printed as a [[stages]] table of ctx.toml at their
    defaults: paste it into ctx.toml and change what you need.

    Example:

    \b
        ctx stages truncate_tool_output
        ctx stages truncate_tool_output --json
    """
    with _errors():
        if name is None:
            specs = list(registry().values())
            if json:
                _write_json({"stages": [_stage_entry(spec) for spec in specs]})
                return
            for spec in specs:
                origin = "" if spec.package == "ctxcli" else f" (plugin {spec.package})"
                typer.echo(_entry(spec.name, spec.summary + origin))
            return
        # Here, not at the top: the schema module is start-up time for every other command.
        from ctxcli.pipeline.schema import option_docs, stage_toml

        spec = get_stage(name)
        if json:
            options = [dataclasses.asdict(o) for o in option_docs(spec)]
            _write_json({**_stage_entry(spec), "doc": spec.doc, "options": options})
            return
        origin = f"\n\nFrom plugin package {spec.package}." if spec.package != "ctxcli" else ""
        typer.echo(
            f"{_prose(f'{spec.name}: {spec.doc}')}{origin}\n\nIn ctx.toml, at its defaults:\n"
        )
        typer.echo(stage_toml(spec), nl=False)


def _stage_entry(spec: StageSpec) -> dict[str, str]:
    return {"name": spec.name, "summary": spec.summary, "package": spec.package}


def _write_json(data: dict[str, Any]) -> None:
    console.write_json(orjson.dumps(data) + b"\n")


def _entry(name: str, summary: str, width: int = 79) -> str:
    """One line of a listing: the name, then its summary wrapped under itself."""
    return textwrap.fill(summary, width, initial_indent=f"{name:24} ", subsequent_indent=" " * 25)


_LITERAL = re.compile(r"``(.+?)``", re.S)


def _prose(doc: str, width: int = 79) -> str:
    """A docstring for the terminal: ``x`` as `x`, each paragraph wrapped at ``width``."""
    paragraphs = _LITERAL.sub(r"`\1`", doc).split("\n\n")
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in paragraphs)


def presets(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Print one preset's ctx.toml.",
            metavar="PRESET",
            autocompletion=lambda incomplete: [
                n for n in preset_names() if n.startswith(incomplete)
            ],
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:
    """List the presets (named stage chains), or print one as a ctx.toml to start from.

    Example:

    \b
        ctx presets claude-code-resume > ctx.toml
        ctx presets --json
    """
    with _errors():
        if name is None:
            entries = [(n, get_preset(n).summary) for n in preset_names()]
            if json:
                _write_json({"presets": [{"name": n, "summary": s} for n, s in entries]})
                return
            for preset_name, summary in entries:
                typer.echo(_entry(preset_name, summary))
            return
        preset = get_preset(name)
        if json:
            _write_json({"name": name, "summary": preset.summary, "toml": preset.text})
            return
        typer.echo(preset.text, nl=False)


def init(
    path: Annotated[Path, typer.Argument(help="Where to write the config.", metavar="FILE")] = Path(
        "ctx.toml"
    ),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented ctx.toml with the default stages.

    Example:

    \b
        ctx init
    """
    with _errors():
        if path.exists() and not force:
            raise CtxError(f"{path} already exists; pass --force to overwrite it.")
        api.write_atomic(path, INIT_TEMPLATE.encode())
        sys.stderr.write(f"ctx: wrote {path}\n")
