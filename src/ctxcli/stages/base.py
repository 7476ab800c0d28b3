"""The stage interface: options, context, result, the registry and its decorator."""

from __future__ import annotations

import inspect
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from ctxcli.core.errors import ConfigError
from ctxcli.core.model import Conversation
from ctxcli.core.plugins import Registry, package_of_module
from ctxcli.core.protocols import Offload
from ctxcli.services.anthropic_client import AnthropicAccess
from ctxcli.services.tokens.ledger import TokenLedger

__all__ = [
    "Frontier",
    "NAME_RE",
    "PLUGIN_GROUP",
    "STAGE_REGISTRY",
    "StageContext",
    "StageFn",
    "StageOptions",
    "StageResult",
    "StageSpec",
    "everything_final",
    "register",
    "renames",
]


def renames(model: type[BaseModel]) -> dict[str, str]:
    """The old option names ``model`` still accepts, each with its new name.

    Collected over the class's bases, so options made of two stages' options (as
    ``strip_and_truncate``'s are) accept the old names of both.
    """
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        found.update(vars(klass).get("renamed", {}))
    return found


def _schema_of_renames(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """Describe each old name in the JSON Schema: deprecated, and never beside its new name."""
    properties = schema.get("properties", {})
    for old, new in renames(model).items():
        if new not in properties:
            continue
        current = {k: v for k, v in properties[new].items() if k not in ("default", "title")}
        properties[old] = {**current, "deprecated": True, "description": f"Old name of {new}."}
        schema.setdefault("allOf", []).append({"not": {"required": [old, new]}})


if TYPE_CHECKING:
    from ctxcli.services.answer_cache import AnswerCache
    from ctxcli.services.classifier import Classifier
    from ctxcli.services.summarizer import Summarizer


class StageOptions(BaseModel):
    """Base of every stage's options: unknown keys are errors, values are frozen.

    A stage that renames an option lists the old name in :attr:`renamed`; a config that
    still uses it is accepted (``ctx config check`` names the new one).
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, defer_build=True, json_schema_extra=_schema_of_renames
    )

    renamed: ClassVar[Mapping[str, str]] = {}
    """Old option names still accepted, each with its new name (``{"n": "keep_messages"}``)."""

    @model_validator(mode="before")
    @classmethod
    def _accept_old_names(cls, data: Any) -> Any:
        old_names = renames(cls)
        if not old_names or not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in old_names.items():
            if old not in data:
                continue
            if new in data:
                raise ValueError(f"{old} is the old name of {new}: give only {new}")
            data[new] = data.pop(old)
        return data


@dataclass(frozen=True)
class StageContext:
    """The services a stage may use; a stage does no I/O of its own.

    ctx builds it in one place, :func:`ctxcli.pipeline.context.stage_context`, for a
    file, a batch, the live :class:`~ctxcli.agent.reducer.Reducer` and
    :func:`ctxcli.testing.run_stage` alike, so a stage finds the same services on every
    route.

    Attributes:
        tokens: counts model-visible tokens (cached per message).
        offload: stores removed text and returns the path to cite.
        language: language of hints, ``"en"`` or ``"zh"``.
        log: receives warnings and notes for the user.
        anthropic: API access for a stage that asks a model (default: from the
            environment; no key: such a stage falls back, and says so).
        answers: the answer cache model services keep their replies in (None: off).
        classifier: a classifier handed in (a test double, a program's own), used
            instead of the one the stage's options name.
        summarizer: a summarizer handed in, likewise.
    """

    tokens: TokenLedger
    offload: Offload
    language: str = "en"
    log: Callable[[str], None] = lambda _msg: None
    anthropic: AnthropicAccess = field(default_factory=AnthropicAccess.from_env)
    answers: AnswerCache | None = None
    classifier: Classifier | None = None
    summarizer: Summarizer | None = None


@dataclass(frozen=True)
class StageResult:
    """What a stage returns: the new conversation and its own counters.

    ``fallbacks`` says, one reason each, what the stage could not do as configured and
    did instead (a classifier or summarizer that could not run: no key, a timeout): the
    run goes on, fail-safe, and a strict run fails once its output is written.
    """

    conversation: Conversation
    counters: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()


class StageFn(Protocol):
    """A stage: a pure function of conversation, options and context."""

    def __call__(self, conv: Conversation, opts: Any, ctx: StageContext, /) -> StageResult:
        """Run the stage on ``conv`` with ``opts``; all I/O through ``ctx``."""


class Frontier(Protocol):
    """Where a stage's decisions become final: see :func:`register`'s ``frontier``."""

    def __call__(self, before: Conversation, result: StageResult, opts: Any, /) -> int:
        """Return how many leading messages of ``before`` hold final decisions."""


def everything_final(before: Conversation, result: StageResult, opts: Any, /) -> int:
    """The frontier of a stage that decides each message alone (truncation, masking)."""
    return len(result.conversation.messages)


@dataclass(frozen=True)
class StageSpec:
    """A registered stage."""

    name: str
    fn: StageFn
    options: type[StageOptions]
    package: str = "ctxcli"
    frontier: Frontier | None = None

    @property
    def doc(self) -> str:
        """The stage's docstring, dedented."""
        return inspect.getdoc(self.fn) or ""

    @property
    def summary(self) -> str:
        """The first line of the docstring."""
        return self.doc.splitlines()[0] if self.doc else ""


NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
PLUGIN_GROUP = "ctxcli.stages.v1"
"""Entry-point group of third-party stages (versioned, so a v2 interface can coexist)."""


def _builtin_modules() -> list[str]:
    # Every module of the stages package except the plumbing is one stage.
    package = __name__.rsplit(".", 1)[0]
    return sorted(
        f"{package}.{m.name}"
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if not m.name.startswith("_") and m.name != "base"
    )


def _admit(spec: StageSpec, package: str) -> StageSpec:
    if not (isinstance(spec.options, type) and issubclass(spec.options, StageOptions)):
        raise ConfigError(
            f"stage {spec.name!r} from {package}: its options must subclass "
            "ctxcli.stages.StageOptions (unknown keys are errors, values frozen)."
        )
    # Errors and listings name the distribution users installed.
    return replace(spec, package=package)


STAGE_REGISTRY: Registry[StageSpec] = Registry(
    kind="stage",
    group=PLUGIN_GROUP,
    builtins=_builtin_modules,
    name_of=lambda spec: spec.name,
    module_of=lambda spec: getattr(spec.fn, "__module__", "") or "",
    how="decorate a function in {module} with @ctxcli.stages.register(name, options=...)",
    admit=_admit,
    same=lambda a, b: a.fn is b.fn,
)
"""Every stage: the built-in modules of this package, then ``ctxcli.stages.v1`` plugins."""


def register(
    name: str, *, options: type[StageOptions], frontier: Frontier | None = None
) -> Callable[[Callable[..., StageResult]], Callable[..., StageResult]]:
    """Declare a stage; the registry adds it when it loads the stage's module.

    ``frontier`` makes the stage usable in incremental re-runs (a transcript that grew
    by appending is reduced again by processing only what is new). It is called after
    the stage ran, with its input conversation, its result and its options, and returns
    how many leading messages hold decisions no appended message can change. A stage
    that declares one promises, for a conversation whose first ``conv.frozen``
    messages are such a kept prefix (roles, tool ids and names, no texts):

    * it neither reads the texts of those messages nor changes them, adds or drops
      messages, or edits records;
    * its output for the other messages is what it would be on the whole conversation.

    :func:`everything_final` is the frontier of a stage that decides each message on
    its own. The pipeline checks the first promise after every stage and falls back to
    a full run when it is broken; tests/pipeline/test_rerun.py checks the second on real files.
    """
    if not NAME_RE.match(name):
        raise ValueError(f"invalid stage name {name!r}: must match {NAME_RE.pattern}")

    def decorate(fn: Callable[..., StageResult]) -> Callable[..., StageResult]:
        module = getattr(fn, "__module__", "") or ""
        spec = StageSpec(name, fn, options, package=package_of_module(module), frontier=frontier)
        STAGE_REGISTRY.register(spec)
        return fn

    return decorate
