"""Where the configuration is: found without importing the validator.

``ctx hooks run`` answers on every tool call of a Claude Code session; it locates the
configuration here (tomllib only) and loads it through :mod:`ctxcli.pipeline.config`
(pydantic, every stage) only when the file changed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["CONFIG_NAME", "find_config"]

CONFIG_NAME = "ctx.toml"


def find_config(start: Path | None = None) -> tuple[Path, str] | None:
    """Locate ``ctx.toml`` in the working directory or ``[tool.ctx]`` in the nearest pyproject."""
    start = (start or Path.cwd()).resolve()
    if (start / CONFIG_NAME).is_file():
        return start / CONFIG_NAME, ""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
                return None  # not ctx's file to judge: a pyproject.toml it cannot read
            if isinstance(data.get("tool"), dict) and "ctx" in data["tool"]:
                return candidate, "tool.ctx"
            return None
        if (directory / ".git").exists():
            return None
    return None
