"""The configuration as documents: its JSON Schema, and a resolved config written as TOML.

The schema is generated from the same pydantic models that validate ``ctx.toml``,
so it cannot disagree with ``ctx``: ``Settings`` gives the top-level keys and every
registered stage's options model gives one ``oneOf`` branch of ``[[stages]]``,
told apart by ``use``. A copy built from the built-in stages ships in the package
(``ctx.schema.json``) for editors; ``scripts/generate_schema.py`` rewrites it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ctxcli.pipeline.config import DEFAULT_STAGES, Config, Settings
from ctxcli.stages import StageSpec, registry

SCHEMA_FILE = "ctx.schema.json"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

__all__ = [
    "SCHEMA_FILE",
    "config_schema",
    "config_to_dict",
    "config_to_toml",
    "schema_text",
    "shipped_schema_text",
    "toml_value",
]


def _stage_specs(include_plugins: bool) -> list[StageSpec]:
    # By name, not registration order: the shipped file must not churn with import order.
    specs = [s for s in registry().values() if include_plugins or s.package == "ctxcli"]
    return sorted(specs, key=lambda s: s.name)


def config_schema(*, include_plugins: bool = True) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``ctx.toml`` and of ``[tool.ctx]`` in pyproject.toml.

    Args:
        include_plugins: also describe stages that installed plugins add; the copy
            shipped in the package has the built-in stages only.
    """
    specs = _stage_specs(include_plugins)
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(Settings, "validation")]
    models += [(s.options, "validation") for s in specs]
    refs, top = models_json_schema(models, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = dict(top.get("$defs", {}))
    settings = defs.pop(refs[(Settings, "validation")]["$ref"].rsplit("/", 1)[1])
    branches = []
    for spec in specs:
        key = refs[(spec.options, "validation")]["$ref"].rsplit("/", 1)[1]
        options = defs.pop(key)
        # Name each branch after its stage: `use` is what users write, and two plugins
        # may well both call their options class `Options`.
        defs[f"stage:{spec.name}"] = _stage_branch(spec, options)
        branches.append({"$ref": f"#/$defs/stage:{spec.name}"})
    default_order = ", ".join(str(s["use"]) for s in DEFAULT_STAGES)
    properties = dict(settings.get("properties", {}))
    properties["stages"] = {
        "type": "array",
        "description": "The stages to run, in this order ([[stages]] tables). "
        f"Without this key: {default_order}. Run 'ctx stages NAME' for a stage's options.",
        "items": {"oneOf": branches} if branches else {"type": "object"},
    }
    schema: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "ctx.toml",
        "description": "Configuration of ctx (ctx.toml, or [tool.ctx] in pyproject.toml). "
        "Generated from ctx's own validation models.",
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def _stage_branch(spec: StageSpec, options: dict[str, Any]) -> dict[str, Any]:
    properties = {
        "use": {"const": spec.name, "description": "The stage to run."},
        **options.get("properties", {}),
    }
    branch: dict[str, Any] = {
        "title": spec.name,
        "description": spec.summary,
        "type": "object",
        "properties": properties,
        "required": ["use", *options.get("required", [])],
        "additionalProperties": False,
    }
    if "allOf" in options:  # an option's old name never beside its new one
        branch["allOf"] = options["allOf"]
    return branch


def schema_text(*, include_plugins: bool = True) -> str:
    """The schema as the stable JSON text that is shipped and printed."""
    schema = config_schema(include_plugins=include_plugins)
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def shipped_schema_text() -> str:
    """The schema file installed with the package."""
    return (resources.files("ctxcli") / SCHEMA_FILE).read_text(encoding="utf-8")


# --- a resolved configuration, written back as TOML -------------------------------------


def config_to_dict(config: Config) -> dict[str, Any]:
    """The configuration as plain data shaped like ``ctx.toml``, every default filled in."""
    return {
        **config.settings.model_dump(mode="json"),
        "stages": [{"use": sc.use, **sc.options.model_dump(mode="json")} for sc in config.stages],
    }


def config_to_toml(config: Config) -> str:
    """The configuration as a complete ``ctx.toml``: loading it yields the same pipeline."""
    lines = [
        f"# Resolved configuration from {config.source}, with every default filled in.",
        "# Stages run in the order listed.",
    ]
    for name, value in config.settings.model_dump(mode="json").items():
        if name == "preset" and value is not None:
            # The preset's stages are written out below; naming it again would merge
            # them a second time, so the output stands on its own.
            lines.append(f"# preset {toml_value(value)}: its stages are written out below")
            continue
        if value is None:
            # TOML has no null: say it is unset rather than invent a value.
            info = Settings.model_fields[name]
            lines.append(f"# {name} is not set. {info.description or ''}".rstrip())
        else:
            lines.append(f"{_key(name)} = {toml_value(value)}")
    for sc in config.stages:
        lines += ["", "[[stages]]", f"use = {toml_value(sc.use)}"]
        for name, value in sc.options.model_dump(mode="json").items():
            if value is None:
                lines.append(f"# {name} is not set")
            else:
                lines.append(f"{_key(name)} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, except that TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    """One value as TOML (inline tables for mappings); None inside arrays or tables is left out."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
