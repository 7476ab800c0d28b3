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
import textwrap
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ctxcli.pipeline.config import DEFAULT_STAGES, Config, Settings
from ctxcli.stages import StageSpec, registry

SCHEMA_FILE = "ctx.schema.json"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

__all__ = [
    "SCHEMA_FILE",
    "OptionDoc",
    "option_docs",
    "stage_toml",
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


@dataclass(frozen=True)
class OptionDoc:
    """One option of a stage as its documentation shows it."""

    name: str
    type: str
    """The option's type in words: ``int``, ``list[str]``, ``str | None``."""
    default: str | None
    """The default as a TOML value, or None when the option is unset by default."""
    description: str


def _type_name(tp: Any) -> str:
    """A type as a reader writes it (``int``, ``list[str]``, ``str | None``), no module paths."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(tp))
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if tp is type(None):
        return "None"
    return tp.__name__ if isinstance(tp, type) else str(tp)


def option_docs(spec: StageSpec) -> list[OptionDoc]:
    """The options of ``spec``: name, type, default as TOML, description."""
    from pydantic_core import to_jsonable_python

    docs = []
    for name, info in spec.options.model_fields.items():
        default = None
        if not info.is_required():
            value = to_jsonable_python(info.get_default(call_default_factory=True))
            default = None if value is None else toml_value(value)
        docs.append(OptionDoc(name, _type_name(info.annotation), default, info.description or ""))
    return docs


def stage_toml(spec: StageSpec, *, width: int = 79) -> str:
    """The stage as a ``[[stages]]`` table of ``ctx.toml``, each option at its default.

    Each option follows its description as a comment; an option unset by default is a
    comment too, so the text loads as it is (``ctx config check`` accepts it).
    """
    lines = ["[[stages]]", f"use = {toml_value(spec.name)}"]
    for doc in option_docs(spec):
        lines += textwrap.wrap(
            f"{doc.type}: {doc.description}", width, initial_indent="# ", subsequent_indent="# "
        )
        if doc.default is None:
            lines.append(f"# {_key(doc.name)} = (unset)")
        else:
            lines.append(_fitted(f"{_key(doc.name)} = ", doc.default, width))
    return "\n".join(lines) + "\n"


def _fitted(key: str, value: str, width: int) -> str:
    """``key value`` in lines of at most ``width``, read back as the same value.

    An array goes one item a line; a string is cut at spaces with TOML's line-ending
    backslash.
    """
    if len(key) + len(value) <= width:
        return key + value
    parsed = tomllib.loads(f"v = {value}")["v"]
    if isinstance(parsed, list):
        items = "".join(f"    {toml_value(v)},\n" for v in parsed)
        return f"{key}[\n{items}]"
    if isinstance(parsed, str) and "  " not in parsed and "\n" not in parsed:
        body = textwrap.wrap(_string(parsed)[1:-1], width - 2, break_long_words=False)
        return key + '"""\\\n' + " \\\n".join(body) + '"""'
    return key + value
