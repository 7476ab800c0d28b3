"""Named stage chains shipped with ctx: ``--preset NAME`` or ``preset = "NAME"``.

A preset is an ordinary ``ctx.toml`` in ``src/ctxcli/pipeline/presets/<name>.toml``; its
leading comment lines document it (the first one is the summary ``ctx presets``
shows). A config file that sets ``preset`` starts from the preset's table: its own
top-level settings override the preset's, and each of its ``[[stages]]`` either
overrides the options of the preset stage with the same ``use`` or, for a stage
the preset does not run, is appended after the preset's stages. ``--preset NAME``
on the command line instead replaces the chain of whatever config file is in use
(its other settings still apply).
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ctxcli.core.errors import ConfigError
from ctxcli.stages import registry
from ctxcli.stages.base import renames

__all__ = ["Preset", "get_preset", "preset_names", "presets_for", "resolve_preset"]


@dataclass(frozen=True)
class Preset:
    """One shipped preset: its name, documentation and TOML text."""

    name: str
    text: str

    @property
    def doc(self) -> str:
        """The leading comment lines, without their ``#``."""
        lines = []
        for line in self.text.splitlines():
            if not line.startswith("#"):
                break
            lines.append(line[1:].strip())
        return "\n".join(lines).strip()

    @property
    def summary(self) -> str:
        """The first line of the documentation."""
        return self.doc.splitlines()[0] if self.doc else ""

    def table(self) -> dict[str, Any]:
        """The parsed TOML."""
        return tomllib.loads(self.text)


def _files() -> dict[str, Any]:
    folder = resources.files(__name__)
    return {
        entry.name.removesuffix(".toml"): entry
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    }


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(_files())


def get_preset(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        ConfigError: no such preset (with a suggestion and the valid names).
    """
    files = _files()
    if name not in files:
        close = difflib.get_close_matches(name, list(files), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"unknown preset {name!r}; {hint}valid presets: {', '.join(sorted(files))}. "
            "Run 'ctx presets' to see what each does."
        )
    return Preset(name, files[name].read_text(encoding="utf-8"))


def _override(base: dict[str, Any], entry: dict[str, Any]) -> None:
    """Write ``entry``'s options over ``base``'s; one under its old name replaces the new one."""
    spec = registry().get(str(entry.get("use")))
    if spec is not None:
        for old, new in renames(spec.options).items():
            if old in entry or new in entry:
                base.pop(old, None)
                base.pop(new, None)
    base.update(entry)


def presets_for(format: str) -> list[str]:
    """The shipped presets made for transcripts of ``format`` (their ``made_for``)."""
    return [
        name for name in preset_names() if format in get_preset(name).table().get("made_for", ())
    ]


def resolve_preset(data: dict[str, Any], label: str) -> dict[str, Any]:
    """The config table ``data`` with the preset it names merged in (``data`` if none).

    Raises:
        ConfigError: the preset is unknown, or a stage entry overrides an ambiguous one.
    """
    name = data.get("preset")
    if name is None:
        return data
    if not isinstance(name, str):
        raise ConfigError(f"{label}: preset = {name!r} is invalid: must be a preset name.")
    try:
        preset = get_preset(name)
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None
    base = preset.table()
    base_stages = [dict(s) for s in base.pop("stages", [])]
    merged: dict[str, Any] = {**base, **{k: v for k, v in data.items() if k != "stages"}}
    extra = data.get("stages")
    if extra is None:
        merged["stages"] = base_stages
        return merged
    if not isinstance(extra, list):
        raise ConfigError(f"{label}: 'stages' must be an array of tables ([[stages]]).")
    stages = base_stages
    for i, entry in enumerate(extra, start=1):
        use = entry.get("use") if isinstance(entry, dict) else None
        same = [s for s in base_stages if s.get("use") == use]
        if len(same) > 1:
            raise ConfigError(
                f"{label}: stages[{i}] ({use}): preset {name!r} runs {use} {len(same)} times, "
                "so it is unclear which one to override; copy the preset "
                f"('ctx presets {name} > ctx.toml') and edit it instead."
            )
        if same:
            _override(same[0], entry)
        else:
            stages.append(entry)
    merged["stages"] = stages
    return merged
