"""The one diagnose engine: named rules over a transcript read line by line.

``ctx validate`` runs the rules every transcript is held to (:data:`TRANSCRIPT_RULES`:
each line is JSON, every tool call has its result and every result its call).
``ctx doctor`` runs the same rules on the same reading of the file, and then the rules of
the client that wrote it (what breaks resuming a Claude Code session or a Codex rollout:
``sessions/client_rules.py``). Both report :class:`Problem`s and print one JSON shape
(:func:`envelope`), so the two commands cannot name different problems for one rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ctxcli.core.pairing import ORPHAN_RESULT, unpaired
from ctxcli.formats.clients import ClientFile

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "Diagnosis",
    "Limits",
    "Problem",
    "Rule",
    "TRANSCRIPT_RULES",
    "diagnose",
    "envelope",
    "json_lines",
    "tool_pairs",
]

DEFAULT_MAX_LINE_BYTES = 1_000_000


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a transcript, on a line (1-based; None: the whole file).

    ``warning``: the transcript works with it (a copy of a payload only costs bytes).
    ``fixable``: ``ctx doctor --fix`` repairs it (None: not asked, as by ``ctx validate``).
    """

    line: int | None
    kind: str
    message: str
    call_id: str | None = None
    warning: bool = False
    fixable: bool | None = None
    rule: str = ""
    """The rule that found it (set by :func:`diagnose`)."""
    guards: str | None = None
    """The client behaviour the check guards against (``ctx doctor``; None elsewhere)."""

    def render(self, path: str) -> str:
        """``path:line: message``."""
        where = f"{path}:{self.line}" if self.line is not None else path
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a problem in ``ctx validate --json`` and ``ctx doctor --json``."""
        return {
            "line": self.line,
            "rule": self.rule,
            "kind": self.kind,
            "call_id": self.call_id,
            "message": self.message,
            "severity": "warning" if self.warning else "error",
            "fixable": self.fixable,
            "guards": self.guards,
        }


@dataclass(frozen=True)
class Limits:
    """What the rules that measure hold a file to."""

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """A longer line stalls a resume (``oversized_line``)."""


@dataclass(frozen=True)
class Rule:
    """A named check: what it looks for and the problems it finds in a file."""

    name: str
    summary: str
    check: Callable[[ClientFile, Limits], Iterable[Problem]]


@dataclass
class Diagnosis:
    """What the rules found in one file, and which rules ran."""

    path: str
    format: str | None
    rules: tuple[str, ...]
    problems: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """No problem but warnings."""
        return not any(not p.warning for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """One entry of ``files`` in the JSON of ``ctx validate`` and ``ctx doctor``."""
        return {
            "input": self.path,
            "format": self.format,
            "rules": list(self.rules),
            "problems": [p.to_dict() for p in self.problems],
            "valid": self.valid,
        }


def json_lines(file: ClientFile, limits: Limits) -> list[Problem]:
    """A line that is not JSON (kept as it is): the last one cut off mid-write, or another."""
    live = [rec for rec in file.records if rec.data is not None or rec.invalid is not None]
    skips = file.client and " the client skips this line"
    problems: list[Problem] = []
    for i, rec in enumerate(live):
        if rec.invalid is None:
            continue
        if i == len(live) - 1 and not rec.terminator:
            problems.append(
                Problem(rec.line, "torn_last_line", "the last line was cut off mid-write")
            )
        else:
            message = rec.invalid + (f";{skips}" if skips else "")
            problems.append(Problem(rec.line, "malformed_line", message))
    return problems


def tool_pairs(file: ClientFile, limits: Limits) -> list[Problem]:
    """Tool results without their call and calls without a result (a final call excepted)."""
    conv = file.conversation
    problems: list[Problem] = []
    for found in unpaired(conv):
        msg = conv.messages[found.ref[0]]
        block = msg.blocks[found.ref[1]]
        if found.kind == ORPHAN_RESULT:
            message = f"tool result {found.call_id!r} has no matching tool call"
        else:
            message = f"tool call {found.call_id!r} ({block.name}) has no result"
        problems.append(Problem(file.line_of(msg), found.kind, message, found.call_id))
    return problems


TRANSCRIPT_RULES: tuple[Rule, ...] = (
    Rule("json_lines", "every line is JSON", json_lines),
    Rule("tool_pairs", "every tool call has its result and every result its call", tool_pairs),
)
"""The rules every transcript is held to, whoever wrote it: what ``ctx validate`` runs."""


def diagnose(
    file: ClientFile, rules: Sequence[Rule] = TRANSCRIPT_RULES, limits: Limits | None = None
) -> Diagnosis:
    """Run ``rules`` over ``file``: its problems by line, and the names of the rules."""
    limits = limits or Limits()
    problems = [replace(p, rule=rule.name) for rule in rules for p in rule.check(file, limits)]
    problems.sort(key=lambda p: (p.line or 0, p.kind))
    return Diagnosis(file.path, file.format_name, tuple(r.name for r in rules), problems)


def envelope(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON of ``ctx validate`` and ``ctx doctor``: ``files`` and ``failed``.

    The shape ``ctx reduce`` and ``ctx stats`` print for one file or many; a single
    file's own entry is at the top level too.
    """
    failed = sum(1 for e in entries if not e.get("valid"))
    single = dict(entries[0]) if len(entries) == 1 else {}
    return {**single, "files": list(entries), "failed": failed}
