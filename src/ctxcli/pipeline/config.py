"""Find, parse and validate the TOML configuration into a frozen :class:`Config`."""

from __future__ import annotations

import difflib
import os
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxcli.core.errors import ConfigError, Remedy
from ctxcli.core.io import is_url, parse_toml
from ctxcli.formats import registry as format_registry
from ctxcli.pipeline.locate import CONFIG_NAME as CONFIG_NAME
from ctxcli.pipeline.locate import find_config as find_config
from ctxcli.pipeline.presets import resolve_preset
from ctxcli.stages import StageOptions, StageSpec, get_stage, registry
from ctxcli.stages.base import renames

__all__ = [
    "CONFIG_NAME",
    "Config",
    "DEFAULT_STAGES",
    "INIT_TEMPLATE",
    "Settings",
    "StageConfig",
    "build_config",
    "default_config",
    "find_config",
    "load_config",
    "stage_names",
]

CONFIG_ENV = "CTX_CONFIG"
"""The environment variable that names the config file to use, as ``-c`` does."""


class Settings(BaseModel):
    """Top-level settings of ctx.toml (everything but ``[[stages]]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokenizer: Literal["cl100k", "o200k", "approx", "anthropic"] = Field(
        "cl100k",
        description="Token counter: cl100k (offline default), o200k, approx (chars/4), "
        "anthropic (exact Claude counts from the API; needs ANTHROPIC_API_KEY).",
    )
    language: Literal["en", "zh"] = Field("en", description="Language of the hints ctx leaves.")
    offload_dir: str | None = Field(
        None,
        description="Where removed text goes (default: <output>.offload, or ./ctx-offload "
        "when writing to stdout).",
    )
    format: str = Field("auto", description="Transcript format, or auto-detect.")
    preset: str | None = Field(
        None,
        description="Start from this shipped chain (run 'ctx presets'); settings here "
        "override its settings, [[stages]] here override its stage of the same name or run "
        "after its stages.",
    )
    incremental: bool = Field(
        True,
        description="When a transcript grew by appending and its previous output and "
        "offload directory are in place, keep that run's decisions for the start and "
        "reduce only the rest (the output is the same as a full run's).",
    )
    made_for: tuple[str, ...] = Field(
        (),
        description="Transcript formats this chain is made for (a client's preset says "
        "which); a transcript of another format gets a warning. Empty: any format.",
    )

    @field_validator("made_for")
    @classmethod
    def _known_formats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        known = format_registry()
        unknown = [name for name in value if name not in known]
        if unknown:
            raise ValueError(f"unknown format {unknown[0]!r}; formats: {', '.join(known)}")
        return value

    @field_validator("offload_dir")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        if value is not None and "\0" in value:
            raise ValueError("a path cannot hold a NUL character (\\0)")
        return value


@dataclass(frozen=True)
class StageConfig:
    """One configured stage: its name, validated options and (once loaded) its spec."""

    use: str
    options: StageOptions
    spec: StageSpec | None = field(default=None, compare=False, repr=False)

    @property
    def stage(self) -> StageSpec:
        """The registered stage, as looked up when the config was loaded."""
        return self.spec if self.spec is not None else get_stage(self.use)


Origin = Literal["defaults", "preset", "argument", "environment", "discovery"]
"""Where a configuration came from: ctx's defaults, a preset alone, a file the caller
named (``-c``), the file ``$CTX_CONFIG`` names, or one found by looking (``./ctx.toml``,
``[tool.ctx]`` of a parent ``pyproject.toml``)."""


@dataclass(frozen=True)
class Config:
    """The resolved configuration of one run.

    ``source`` names it (a path, a preset, ``defaults``); ``origin`` says how it was
    chosen (see :data:`Origin`).
    """

    settings: Settings = field(default_factory=lambda: Settings())
    stages: tuple[StageConfig, ...] = ()
    source: str = "defaults"
    notes: tuple[str, ...] = field(default=(), compare=False)
    """One line per option written under an old name (``ctx config check`` prints them)."""
    origin: Origin = "defaults"

    def with_overrides(self, **values: Any) -> Config:
        """A copy with some settings replaced (command-line flags); None means unset."""
        updates = {k: v for k, v in values.items() if v is not None}
        if not updates:
            return self
        merged = {**self.settings.model_dump(), **updates}
        try:
            settings = Settings.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(_render(exc, "command line", None)) from None
        return replace(self, settings=settings)


DEFAULT_STAGES: tuple[dict[str, Any], ...] = (
    {"use": "truncate_tool_output"},
    {"use": "clear_tool_results"},
)


def default_config() -> Config:
    """The configuration used when no file is found: Eino's two stages with its defaults."""
    return build_config({"stages": [dict(s) for s in DEFAULT_STAGES]}, "defaults")


def load_config(
    path: str | Path | None = None, *, start: Path | None = None, preset: str | None = None
) -> Config:
    """Load the configuration.

    From ``path``, else ``$CTX_CONFIG``, else ./ctx.toml, else pyproject ``[tool.ctx]``,
    else defaults.

    ``preset`` (``--preset``) replaces the file's chain: its ``preset`` and
    ``[[stages]]``; the file's other settings still apply.

    A file found by looking (``./ctx.toml``, ``[tool.ctx]``: a cloned repository may hold
    one its user never read) may not choose where data goes over the network: a stage's
    ``base_url`` (any option ending in ``url``) other than the API's default host, or an
    ``offload_dir`` in object storage, is refused. Only a file named (``path``,
    ``$CTX_CONFIG``) may.

    Raises:
        ConfigError: the file cannot be read or parsed, a key or value is invalid, or a
            file found by looking names a network destination.
    """
    table = ""
    origin: Origin = "argument"
    if path is None and os.environ.get(CONFIG_ENV):
        path, origin = os.environ[CONFIG_ENV], "environment"
    if path is None:
        found = find_config(start)
        if found is None:
            if preset is not None:
                return replace(
                    build_config({"preset": preset}, f"preset {preset}"), origin="preset"
                )
            return default_config()
        path, table = found
        origin = "discovery"
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found; check the path (or run 'ctx init' to write one)."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config ({exc}).") from None
    data = parse_toml(text, str(path))
    if table:
        data = data["tool"]["ctx"]
        label = f"{path} [tool.ctx]"
    else:
        label = str(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{label}: expected a table of settings.")
    if preset is not None:
        data = {k: v for k, v in data.items() if k != "stages"} | {"preset": preset}
        label = f"{label} with preset {preset}"
    config = replace(build_config(data, label), origin=origin)
    if origin == "discovery":
        _refuse_destinations(config)
    return config


DEFAULT_API_HOSTS = frozenset({"api.anthropic.com"})
"""The hosts the SDKs send to by default: a config found by looking may name these."""


def _refuse_destinations(config: Config) -> None:
    """Refuse a config found by looking that names where data goes over the network.

    Raises:
        ConfigError: naming the file, the key and the value, with the remedy.
    """
    where = config.source
    offload = config.settings.offload_dir
    if offload is not None and is_url(offload):
        _refuse(f"{where}: offload_dir = {offload!r}", "the removed text")
    for i, sc in enumerate(config.stages, start=1):
        for key, value in _urls(sc.options.model_dump(mode="json")):
            if urlsplit(value).hostname not in DEFAULT_API_HOSTS:
                _refuse(f"{where}: stages[{i}] ({sc.use}): {key} = {value!r}", "the transcript")


def _refuse(setting: str, what: str) -> None:
    raise ConfigError(
        f"{setting} would send {what} (and, to an API, your key) to a host the file chose; "
        "a config found in the working directory or a parent pyproject.toml may not "
        "choose a network destination",
        remedy=Remedy.NAME_CONFIG,
    )


def _urls(options: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Yield ``(key, value)`` of every option whose name ends in ``url`` and is set.

    Nested options (per-tool overrides) included.
    """
    if isinstance(options, dict):
        for key, value in options.items():
            name = f"{prefix}{key}"
            if isinstance(value, str) and str(key).lower().endswith("url"):
                yield name, value
            else:
                yield from _urls(value, f"{name}.")
    elif isinstance(options, list):
        for i, value in enumerate(options):
            yield from _urls(value, f"{prefix}{i}.")


def build_config(data: dict[str, Any], label: str) -> Config:
    """Validate a parsed TOML table into a :class:`Config`."""
    data = resolve_preset(dict(data), label)
    if isinstance(data.get("preset"), str) and "preset" not in label:
        label = f"{label} (preset {data['preset']})"
    raw_stages = data.pop("stages", None)
    known = set(Settings.model_fields) | {"stages"}
    for key in data:
        if key not in Settings.model_fields:
            owners = [n for n, spec in registry().items() if key in spec.options.model_fields]
            if owners:
                raise ConfigError(
                    f"{label}: unknown key {key!r}; it is an option of stage {owners[0]!r}: "
                    f'put it under [[stages]] with use = "{owners[0]}".'
                )
            raise ConfigError(f"{label}: unknown key {key!r}{_suggest(key, known)}")
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_render(exc, label, None)) from None
    if raw_stages is None:
        raw_stages = [dict(s) for s in DEFAULT_STAGES]
    if not isinstance(raw_stages, list):
        raise ConfigError(f"{label}: 'stages' must be an array of tables ([[stages]]).")
    stages: list[StageConfig] = []
    notes: list[str] = []
    # Load plugins up front: a broken plugin is not the fault of any one [[stages]] entry.
    registry()
    for i, entry in enumerate(raw_stages, start=1):
        where = f"{label}: stages[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("use"), str):
            raise ConfigError(f'{where}: each stage needs use = "<stage name>".')
        options = dict(entry)
        name = options.pop("use")
        try:
            spec = get_stage(name)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:
            opts = spec.options.model_validate(options)
        except ValidationError as exc:
            raise ConfigError(_render(exc, f"{where} ({name})", spec.options, options)) from None
        stages.append(StageConfig(name, opts, spec))
        notes += _old_names(spec.options, options, f"{where} ({name})", "")
    return Config(settings, tuple(stages), label, tuple(notes))


def _old_names(model: type[BaseModel], table: Any, where: str, prefix: str) -> list[str]:
    """A note for each option of ``table`` written under its old name, nested tables too.

    ``table`` is what ``model`` validated; ``prefix`` is its place in the stage's table
    (``tools.grep.`` for a per-tool override).
    """
    if not isinstance(table, dict):
        return []
    notes = [
        f"{where}: {prefix}{old} is the old name of {prefix}{new}; it still works, but write {new}."
        for old, new in renames(model).items()
        if old in table
    ]
    for name, info in model.model_fields.items():
        value = table.get(name)
        inner = _model_in(info.annotation)
        if inner is None or not isinstance(value, dict):
            continue
        if typing.get_origin(info.annotation) is dict:
            for key, item in value.items():
                notes += _old_names(inner, item, where, f"{prefix}{name}.{key}.")
        else:
            notes += _old_names(inner, value, where, f"{prefix}{name}.")
    return notes


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The options model ``annotation`` holds: itself, a dict's values, or Optional's model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _suggest(key: str, valid: set[str] | list[str], renamed: dict[str, str] | None = None) -> str:
    """A "did you mean" for ``key`` (a typo of an old option name suggests the new name)."""
    renamed = renamed or {}
    close = difflib.get_close_matches(key, sorted(valid) + sorted(renamed), n=1)
    if close:
        return f"; did you mean {renamed.get(close[0], close[0])!r}?"
    return f"; valid keys: {', '.join(sorted(valid))}." if valid else "."


def _render(
    exc: ValidationError, where: str, model: type[BaseModel] | None, table: Any = None
) -> str:
    lines = []
    for err in exc.errors():
        loc = _as_written(model, table, err["loc"])
        if err["type"] == "extra_forbidden":
            at = _model_at(model, err["loc"][:-1]) if model else Settings
            fields = list(getattr(at, "model_fields", {}) or [])
            old = renames(at) if isinstance(at, type) and issubclass(at, BaseModel) else {}
            lines.append(
                f"{where}: unknown option {loc!r}{_suggest(str(err['loc'][-1]), fields, old)}"
            )
            continue
        # A validator's own ValueError reads "Value error, <its message>"; the
        # message is meant for the user as it stands.
        msg = err["msg"].removeprefix("Value error, ")
        msg = msg[0].lower() + msg[1:]
        if not err["loc"]:
            # A check across fields: its message names the fields it compares.
            lines.append(f"{where}: {msg}")
            continue
        value = err.get("input")
        shown = f" = {value!r}" if not isinstance(value, dict) else ""
        lines.append(f"{where}: {loc}{shown} is invalid: {msg}")
    text = "\n".join(lines)
    if model is not None and "(" in where:
        stage = where.rsplit("(", 1)[1].rstrip(")")
        end = "" if text.endswith((".", "?")) else "."
        text += f"{end} Run 'ctx stages {stage}' for options."
    return text


def _as_written(model: type[BaseModel] | None, table: Any, loc: tuple[Any, ...]) -> str:
    """``loc`` as the user wrote it: an option given under its old name shows that name."""
    parts: list[str] = []
    keyed: type[BaseModel] | None = None  # the model of a dict's values: the next part is a key
    for part in loc:
        key = str(part)
        if keyed is not None:
            model, keyed = keyed, None
        elif model is not None:
            info = model.model_fields.get(key)
            if isinstance(table, dict) and key not in table:
                key = next((o for o, n in renames(model).items() if n == key and o in table), key)
            inner = _model_in(info.annotation) if info is not None else None
            if info is not None and typing.get_origin(info.annotation) is dict:
                model, keyed = None, inner
            else:
                model = inner
        parts.append(key)
        table = table.get(key) if isinstance(table, dict) else None
    return ".".join(parts)


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The model that sits at ``loc`` inside ``model`` (for suggestions; None if none)."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if fields is not None and part in fields:
            current = fields[part].annotation
        else:
            # A dict value (per-tool overrides) or a list item: step into its value type.
            args = typing.get_args(current)
            current = args[-1] if args else None
        if typing.get_origin(current) in (typing.Union, types.UnionType):
            # Optional[Model]: step into the model.
            models = [a for a in typing.get_args(current) if hasattr(a, "model_fields")]
            current = models[0] if models else None
    return current


def stage_names() -> list[str]:
    """Names of all registered stages."""
    return list(registry())


INIT_TEMPLATE = """# ctx.toml: how `ctx reduce` shrinks transcripts. Run `ctx stages` for every stage.
tokenizer = "cl100k"          # "cl100k" (default, offline), "o200k", "approx" (chars/4)
language = "en"               # language of the hints ctx leaves: "en" or "zh"
# offload_dir = "ctx-offload" # default: <output file>.offload, or ./ctx-offload for stdout

# Stages run in the order written here.
[[stages]]
use = "truncate_tool_output"  # cut long tool results, offload the full text to trunc/
max_chars = 50000             # characters
read_tool_name = "read_file"  # the tool your agent uses to read files back
# [stages.tools.grep]         # per-tool override, takes precedence
# max_chars = 20000
# [stages.tools.read_file]
# skip = true

[[stages]]
use = "clear_tool_results"    # over the budget, clear old tool results to clear/
max_tokens = 30000
keep_rounds = 1               # the last N rounds of tool calls stay untouched
clear_arguments = false       # also offload the arguments of cleared calls
"""
