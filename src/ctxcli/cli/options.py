"""Options and arguments every ctx command shares, so each command module declares none again."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from ctxcli.core.errors import CtxError, OnInvalid
from ctxcli.formats import FORMATS, format_names
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.presets import preset_names
from ctxcli.services.tokens.engines import TOKENIZERS

__all__ = [
    "AllowEmptyOpt",
    "ColumnOpt",
    "ConfigOpt",
    "EngineOpt",
    "FormatOpt",
    "Input",
    "Inputs",
    "JobsOpt",
    "JsonOpt",
    "NoCacheOpt",
    "OffloadDirOpt",
    "OnInvalidOpt",
    "PresetOpt",
    "QuietOpt",
    "ScopeGlobalOpt",
    "ScopeLocalOpt",
    "ScopeProjectOpt",
    "TokenizerOpt",
    "command_config",
    "one_input",
]


Input = Annotated[
    str,
    typer.Argument(help="Transcript file, or - for stdin.", show_default=False, metavar="FILE"),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", metavar="FILE", help="ctx.toml to use.", dir_okay=False),
]


def _completer(names: Callable[[], Iterable[str]]) -> Callable[[str], list[str]]:
    """Shell completion over a list of names (formats, presets, tokenizers)."""
    return lambda incomplete: [n for n in names() if n.startswith(incomplete)]


TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        metavar="NAME",
        help=f"Tokenizer: {', '.join(TOKENIZERS)} (overrides the config).",
        autocompletion=_completer(lambda: TOKENIZERS),
    ),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="NAME",
        help=f"Transcript format (default: auto-detect): {', '.join(format_names(FORMATS))}.",
        autocompletion=_completer(lambda: format_names(FORMATS)),
    ),
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        metavar="NAME",
        help=f"Run a named stage chain instead of the config's: {', '.join(preset_names())}.",
        autocompletion=_completer(preset_names),
    ),
]
OnInvalidOpt = Annotated[
    str,
    typer.Option(
        "--on-invalid",
        metavar="error|keep|auto",
        help="A line that is not JSON. error: stop; keep: pass it through with a warning; "
        "auto: keep for Claude Code and Codex (their clients skip such lines), else error. "
        "Default: auto (validate: error, strict by design).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Inputs = Annotated[
    list[str] | None,
    typer.Argument(
        help="Transcript file, - for stdin, or several files or directories.",
        show_default=False,
        metavar="INPUT",
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        metavar="N",
        min=1,
        help="Processes: files at once for several inputs (default 1), "
        "else counting processes for one large file (default: every core).",
    ),
]
AllowEmptyOpt = Annotated[
    bool,
    typer.Option("--allow-empty", help="A directory with no transcript file is not an error."),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Exit 3 if a stage fell back (a summarizer or classifier that could not run: "
        "no key, a timeout); the output is still written. --json lists the fallbacks.",
    ),
]
NoCacheOpt = Annotated[
    bool, typer.Option("--no-cache", help="Do not read or write the token-count cache.")
]


def on_invalid_of(value: str) -> OnInvalid:
    """``--on-invalid`` as the library takes it: the one conversion, worded with the flag."""
    if value not in {member.value for member in OnInvalid}:
        raise CtxError(f"--on-invalid {value!r} is invalid: use 'auto', 'error' or 'keep'.")
    return OnInvalid(value)


OffloadDirOpt = Annotated[
    str | None, typer.Option("--offload-dir", metavar="DIR", help="Where removed text goes.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")]
# Which settings file of a client (ctx hooks): the project's, the personal one, or the user's.
ScopeProjectOpt = Annotated[
    bool, typer.Option("--project", help="The project's .claude/settings.json (the default).")
]
ScopeLocalOpt = Annotated[
    bool, typer.Option("--local", help="The project's .claude/settings.local.json (personal).")
]
ScopeGlobalOpt = Annotated[
    bool,
    typer.Option("--global", help="Your own settings ($CLAUDE_CONFIG_DIR or ~/.claude; ~/.codex)."),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="local|ray",
        help="local, or ray: INPUT is a JSONL/Parquet dataset reduced with Ray Data.",
    ),
]
ColumnOpt = Annotated[
    str,
    typer.Option(
        "--column", metavar="NAME", help="With --engine ray: the column holding trajectories."
    ),
]


_CHOSEN = {"environment": "named by CTX_CONFIG", "discovery": "found; -c names another"}
"""How a config the command line did not name was chosen, as the one line says it."""


def command_config(
    path: Path | None,
    tokenizer: str | None,
    fmt: str | None,
    preset: str | None = None,
    *,
    quiet: bool = False,
) -> Config:
    """The configuration a command runs: the file or preset, with the flags on top.

    A file the command line did not name (found, or named by ``CTX_CONFIG``) is said in
    one line on stderr, unless ``quiet``: the user may not know it is there.
    """
    config = load_config(path, preset=preset).with_overrides(tokenizer=tokenizer, format=fmt)
    if config.origin in _CHOSEN and not quiet:
        sys.stderr.write(f"ctx: config {config.source} ({_CHOSEN[config.origin]})\n")
    return config


def one_input(inputs: list[str] | None) -> str:
    """The one transcript a command reads: the file given, or stdin when it is piped."""
    if inputs:
        return inputs[0]
    if sys.stdin.isatty():
        raise CtxError("no INPUT given and stdin is a terminal; pass a file or pipe one with -.")
    return "-"
