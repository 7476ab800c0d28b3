"""``ctx config``: check a configuration and print its JSON Schema."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.pipeline.config import load_config

__all__ = ["check", "config_app", "schema"]

config_app = typer.Typer(
    name="config",
    help="Check a configuration or print its JSON Schema.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    rich_markup_mode=None,
)


@config_app.command()
def check(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="Config to check (default: ./ctx.toml, else [tool.ctx] in pyproject.toml).",
            dir_okay=False,
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Validate a configuration and print the resolved pipeline, defaults filled in.

    The output is itself a valid ctx.toml. Exit code 2 and one line per problem
    on stderr if the configuration is invalid.

    Example:

    \b
        ctx config check ctx.toml
    """
    # Imported here, as in schema(): other commands' start-up does not need it.
    from ctxcli.pipeline.schema import config_to_dict, config_to_toml

    with _errors():
        config = load_config(file)
        if json:
            payload = {"source": config.source, **config_to_dict(config)}
            console.write_stdout(orjson.dumps(payload) + b"\n")
        else:
            console.write_stdout(config_to_toml(config).encode())
        for note in config.notes:
            sys.stderr.write(f"ctx: {note}\n")
        where = (
            "no ctx.toml or [tool.ctx] found; the built-in defaults"
            if config.source == "defaults"
            else config.source
        )
        sys.stderr.write(f"ctx: {where}: valid, {len(config.stages)} stages\n")


@config_app.command()
def schema() -> None:
    """Print the JSON Schema of ctx.toml (built-in stages plus installed plugins).

    Point your editor at it, e.g. with a first line '#:schema ./ctx.schema.json'
    in ctx.toml for Taplo / Even Better TOML.

    Example:

    \b
        ctx config schema > ctx.schema.json
    """
    from ctxcli.pipeline.schema import schema_text

    with _errors():
        console.write_stdout(schema_text().encode())
