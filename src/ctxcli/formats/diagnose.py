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
from typing import Any, Protocol

from ctxcli.core.io import Input
from ctxcli.core.pairing import ORPHAN_RESULT, unpaired
from ctxcli.formats.clients import ClientFile, scan_client_file
from ctxcli.formats.lines import Record

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "Check",
    "Diagnosis",
    "Limits",
    "Problem",
    "Rule",
    "TRANSCRIPT_RULES",
    "diagnose",
    "diagnose_input",
    "scan_diagnose",
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


class Check(Protocol):
    """A rule at work on one file: it sees each record whole, once, then judges.

    :meth:`see` gets every record in file order with its data as parsed (a record the
    client skips has none); the data is let go once all rules have seen it.
    :meth:`problems` then gets the file with records that are thin (ids, links, types:
    :meth:`~ctxcli.formats.format.Format.thin`) and its conversation without texts, or,
    for a file read whole, the same records again.
    """

    def see(self, rec: Record) -> None:
        """Take what the rule needs of one record (a digest, a flag: never its data)."""
        ...

    def problems(self, file: ClientFile) -> Iterable[Problem]:
        """The problems found, once every record was seen."""
        ...


@dataclass
class _WholeFile:
    """A rule that reads only what the thin records and the conversation hold."""

    judge: Callable[[ClientFile, Limits], Iterable[Problem]]
    limits: Limits

    def see(self, rec: Record) -> None:
        pass

    def problems(self, file: ClientFile) -> Iterable[Problem]:
        return self.judge(file, self.limits)


@dataclass(frozen=True)
class Rule:
    """A named check: what it looks for and how it finds its problems in a file.

    ``start`` makes the rule's :class:`Check` for one file; a rule that reads only ids,
    links, types, sizes and the conversation's calls is made with :meth:`whole`.
    """

    name: str
    summary: str
    start: Callable[[Limits], Check]

    @classmethod
    def whole(
        cls, name: str, summary: str, judge: Callable[[ClientFile, Limits], Iterable[Problem]]
    ) -> Rule:
        """A rule that judges the file as a whole, from its thin records."""
        return cls(name, summary, lambda limits: _WholeFile(judge, limits))

    def check(self, file: ClientFile, limits: Limits) -> list[Problem]:
        """The rule's problems in a file read whole (each record seen, then judged)."""
        return list(_seen_all(file, self.start(limits)).problems(file))


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


@dataclass
class _JsonLines:
    """A line that is not JSON (kept as it is): the last one cut off mid-write, or another."""

    invalid: list[tuple[int, str, bool]] = field(default_factory=list)
    """(line, why, ends without a terminator) of each line that is not JSON."""
    last: int | None = None
    """The line of the last record that holds something."""

    def see(self, rec: Record) -> None:
        if rec.data is None and rec.invalid is None:
            return
        self.last = rec.line
        if rec.invalid is not None:
            self.invalid.append((rec.line, rec.invalid, not rec.terminator))

    def problems(self, file: ClientFile) -> list[Problem]:
        skips = file.client and " the client skips this line"
        problems: list[Problem] = []
        for line, why, open_ended in self.invalid:
            if line == self.last and open_ended:
                problems.append(
                    Problem(line, "torn_last_line", "the last line was cut off mid-write")
                )
            else:
                message = why + (f";{skips}" if skips else "")
                problems.append(Problem(line, "malformed_line", message))
        return problems


def json_lines(file: ClientFile, limits: Limits) -> list[Problem]:
    """A line that is not JSON (kept as it is): the last one cut off mid-write, or another."""
    return list(_seen_all(file, _JsonLines()).problems(file))


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
    Rule("json_lines", "every line is JSON", lambda _limits: _JsonLines()),
    Rule.whole(
        "tool_pairs", "every tool call has its result and every result its call", tool_pairs
    ),
)
"""The rules every transcript is held to, whoever wrote it: what ``ctx validate`` runs."""


def diagnose(
    file: ClientFile, rules: Sequence[Rule] = TRANSCRIPT_RULES, limits: Limits | None = None
) -> Diagnosis:
    """Run ``rules`` over ``file``, read whole: its problems by line, the rules' names."""
    limits = limits or Limits()
    checks = [rule.start(limits) for rule in rules]
    for rec in file.records:
        for running in checks:
            running.see(rec)
    return _diagnosis(file, rules, checks)


def diagnose_input(
    raw: Input,
    path: str,
    rules_of: Callable[[ClientFile], Sequence[Rule]],
    limits: Limits | None = None,
) -> Diagnosis:
    """:func:`diagnose` of the bytes of a file, each line parsed once and let go.

    The rules (``rules_of`` the file, its format known) see each record whole as it is
    read (:func:`~ctxcli.formats.clients.scan_client_file`), and judge the file from its
    thin records: the file's parsed records never exist at once. Same problems, in the
    same order, as :func:`diagnose` of the file read whole.
    """
    return scan_diagnose(raw, path, rules_of, limits)[1]


def scan_diagnose(
    raw: Input,
    path: str,
    rules_of: Callable[[ClientFile], Sequence[Rule]],
    limits: Limits | None = None,
    also: Callable[[Record], None] | None = None,
) -> tuple[ClientFile, Diagnosis]:
    """:func:`diagnose_input`, and the file as read: its thin records and conversation.

    ``also`` sees each record whole too, after the rules (a repair that needs more of
    the file than its problems).
    """
    limits = limits or Limits()
    rules: list[Rule] = []
    checks: list[Check] = []

    def watch(file: ClientFile) -> Callable[[Record], None]:
        rules.extend(rules_of(file))
        checks.extend(rule.start(limits) for rule in rules)

        def see(rec: Record) -> None:
            for running in checks:
                running.see(rec)
            if also is not None:
                also(rec)

        return see

    file = scan_client_file(raw, path, watch)
    return file, _diagnosis(file, rules, checks)


def _seen_all(file: ClientFile, running: Check) -> Check:
    for rec in file.records:
        running.see(rec)
    return running


def _judge(file: ClientFile, rules: Sequence[Rule], checks: Sequence[Check]) -> list[list[Problem]]:
    return [
        [replace(p, rule=rule.name) for p in running.problems(file)]
        for rule, running in zip(rules, checks, strict=True)
    ]


def _diagnosis(file: ClientFile, rules: Sequence[Rule], checks: Sequence[Check]) -> Diagnosis:
    problems = [p for found in _judge(file, rules, checks) for p in found]
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
