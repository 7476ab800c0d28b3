"""Find, parse and validate the TOML configuration into a frozen :class:`Config`."""

from __future__ import annotations

import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxcli.core.errors import ConfigError
from ctxcli.pipeline.locate import CONFIG_NAME as CONFIG_NAME
from ctxcli.pipeline.locate import find_config as find_config
from ctxcli.pipeline.presets import resolve_preset
from ctxcli.stages import StageOptions, StageSpec, get_stage, registry


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


@dataclass(frozen=True)
class Config:
    """The resolved configuration of one run."""

    settings: Settings = field(default_factory=lambda: Settings())
    stages: tuple[StageConfig, ...] = ()
    source: str = "defaults"

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
        return Config(settings, self.stages, self.source)


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
    """Load the configuration: ``path``, else ./ctx.toml, else pyproject ``[tool.ctx]``, else defaults.

    ``preset`` (``--preset``) replaces the file's chain: its ``preset`` and
    ``[[stages]]``; the file's other settings still apply.

    Raises:
        ConfigError: the file cannot be read or parsed, or a key or value is invalid.
    """
    table = ""
    if path is None:
        found = find_config(start)
        if found is None:
            if preset is not None:
                return build_config({"preset": preset}, f"preset {preset}")
            return default_config()
        path, table = found
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found; check the path (or run 'ctx init' to write one)."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config ({exc}).") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}.") from None
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
    return build_config(data, label)


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
            raise ConfigError(_render(exc, f"{where} ({name})", spec.options)) from None
        stages.append(StageConfig(name, opts, spec))
    return Config(settings, tuple(stages), label)


def _suggest(key: str, valid: set[str] | list[str]) -> str:
    close = difflib.get_close_matches(key, sorted(valid), n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; valid keys: {', '.join(sorted(valid))}." if valid else "."


def _render(exc: ValidationError, where: str, model: type[BaseModel] | None) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            fields = _fields_at(model, err["loc"][:-1]) if model else list(Settings.model_fields)
            lines.append(f"{where}: unknown option {loc!r}{_suggest(str(err['loc'][-1]), fields)}")
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


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model that sits at ``loc`` inside ``model`` (for suggestions)."""
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
    return list(getattr(current, "model_fields", {}) or [])


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
max_length = 50000            # characters
read_tool_name = "read_file"  # the tool your agent uses to read files back
# [stages.tools.grep]         # per-tool override, takes precedence
# max_length = 20000
# [stages.tools.read_file]
# skip = true

[[stages]]
use = "clear_tool_results"    # over the budget, clear old tool results to clear/
max_tokens = 30000
keep_rounds = 1               # the last N rounds of tool calls stay untouched
clear_arguments = false       # also offload the arguments of cleared calls
"""
