"""``ctx stages``, ``ctx presets`` and ``ctx init``: what ctx can do, and a config to start from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxcli import api
from ctxcli.cli.boundary import errors as _errors
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import INIT_TEMPLATE
from ctxcli.pipeline.presets import get_preset, preset_names
from ctxcli.stages import get_stage, registry

__all__ = ["init", "presets", "stages"]


def stages(
    name: Annotated[
        str | None, typer.Argument(help="Show one stage's options.", metavar="STAGE")
    ] = None,
) -> None:
    """List the stages, or show one stage's documentation and options.

    Example:

    \b
        ctx stages truncate_tool_output
    """
    with _errors():
        if name is None:
            for spec in registry().values():
                origin = "" if spec.package == "ctxcli" else f" (plugin {spec.package})"
                typer.echo(f"{spec.name:24} {spec.summary}{origin}")
            return
        spec = get_stage(name)
        origin = "" if spec.package == "ctxcli" else f"\n\nFrom plugin package {spec.package}."
        typer.echo(f"{spec.name}: {spec.doc}{origin}\n\nOptions:")
        for field_name, info in spec.options.model_fields.items():
            default: Any = info.get_default(call_default_factory=True)
            typer.echo(f"  {field_name} = {default!r}\n      {info.description or ''}")


def presets(
    name: Annotated[
        str | None, typer.Argument(help="Print one preset's ctx.toml.", metavar="PRESET")
    ] = None,
) -> None:
    """List the presets (named stage chains), or print one as a ctx.toml to start from.

    Example:

    \b
        ctx presets claude-code-resume > ctx.toml
    """
    with _errors():
        if name is None:
            for preset_name in preset_names():
                typer.echo(f"{preset_name:24} {get_preset(preset_name).summary}")
            return
        typer.echo(get_preset(name).text, nl=False)


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
