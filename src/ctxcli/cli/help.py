"""How ``ctx`` shows its help and its usage errors: as a person reads them.

Typer's plain help names Python types (``<str>``, ``<int range>``, ``input
<typing.Annotated[...]>``) beside options and arguments, braces required arguments
(``{client}``), lists commands flat with summaries cut at 45 characters, and words
usage errors in Click's style. Here: every value is shown by its metavar (or its name,
upper-cased), arguments as Click shows them (``FILE``, ``[INPUT]...``), commands in
their panels (core, sessions, live, config) with whole summaries, and every usage error
as ``ctx: error: ...`` with exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
import typer.core
from typer._click import exceptions as click_exceptions

from ctxcli.cli import console
from ctxcli.core.errors import ExitCode

__all__ = ["PANELS", "CtxGroup", "value_name"]

PANELS = ("Core", "Sessions", "Live", "Config")
"""The panels of ``ctx --help``, in order; a command in none is listed last, under Other."""


def value_name(param: Any) -> str:
    """What help shows for a parameter's value: its metavar, else its name upper-cased."""
    if param.metavar is not None:
        return str(param.metavar)
    return str(param.name or "value").upper()


def _option_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    return value_name(self)


def _argument_type(self: typer.core.TyperArgument, ctx: Any) -> str | None:
    # The name column already says what to pass (FILE, INPUT): no type beside it.
    return None


def _argument_name(self: typer.core.TyperArgument) -> str:
    return value_name(self)


def _usage_name(self: typer.core.TyperArgument) -> str:
    name = value_name(self)
    name = name if self.required else f"[{name}]"
    return name + "..." if self.nargs != 1 else name


typer.core.TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign,assignment]
typer.core.TyperArgument._rich_display_name = _argument_name  # type: ignore[method-assign]
typer.core.TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]


def usage_message(exc: click_exceptions.UsageError) -> str:
    """A usage error as one line: what was wrong, and where the command's help is."""
    text = exc.format_message().rstrip(".")
    text = text[:1].lower() + text[1:]
    where = exc.ctx.command_path if exc.ctx is not None else "ctx"
    return f"{text}; see '{where} --help'."


class CtxGroup(typer.core.TyperGroup):
    """The ``ctx`` group: commands listed by panel, usage errors in ctx's one style."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the commands under their panels, each with its whole summary."""
        panels: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            panel = getattr(cmd, "rich_help_panel", None) or "Other"
            panels.setdefault(panel, []).append((name, cmd.get_short_help_str(limit=1_000)))
        order = [p for p in PANELS if p in panels] + [p for p in panels if p not in PANELS]
        for panel in order:
            with formatter.section(panel):
                formatter.write_dl(panels[panel])

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; a usage error is one ``ctx: error:`` line and exit code 2."""
        try:
            rv = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except click_exceptions.NoArgsIsHelpError as exc:
            exc.show()
            code = exc.exit_code
        except click_exceptions.UsageError as exc:
            console.error(usage_message(exc))
            code = int(ExitCode.USAGE_ERROR)
        except click_exceptions.ClickException as exc:
            console.error(exc.format_message())
            code = exc.exit_code
        except typer.Abort:
            console.error("aborted")
            code = 1
        else:
            if not standalone_mode:
                return rv
            code = rv if isinstance(rv, int) else 0
        if not standalone_mode:
            raise SystemExit(code)
        sys.exit(code)
