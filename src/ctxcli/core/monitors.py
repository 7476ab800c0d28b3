"""Stuck-agent monitors: six scores in [0, 1] computed from a transcript's tool calls.

:func:`steps_of` turns any format's conversation into :class:`Step`s (action,
arguments, thought, observation, is_error); each monitor is a pure function of the
steps and measures one thing (0 = none of it, 1 = as much as it counts). No single
score says an agent is stuck: :func:`looks_stuck` does, by the rule the
``nudge_early_exit`` stage acts on, and ``ctx stats`` shows the scores when it holds.

========== ================================================================================
streak     identical trailing actions (same tool, same arguments; at least two) / 5
no_progress of the last 10 calls, those that repeat an earlier call and got the same
           result back (nothing new learnt) / 5
edit_revert a file edited back to an earlier state (1 each), or edit -> error -> edit on one
           path (0.5 each); the sum / 2
test_repeat the most frequent normalised failure signature: (repeats - 1) / 3
diversity  over >= 8 actions: how few distinct tools the last 5 use (1 tool -> 1.0,
           2 -> 0.75, 3 -> 0.5 ...); high means *low* diversity
hedge      the larger of: retraction phrases in the late half of the thoughts, and the
           rise in hedging words from the early to the late half
========== ================================================================================

All scores are clipped to [0, 1].
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.core.model import Block, Conversation, Kind

__all__ = [
    "Edit",
    "MONITORS",
    "MONITOR_HELP",
    "NO_PROGRESS_WINDOW",
    "Step",
    "StuckRule",
    "conversation_monitors",
    "diversity",
    "edit_of",
    "edit_revert",
    "edit_revert_events",
    "failure_signature",
    "hedge",
    "looks_failed",
    "looks_stuck",
    "monitor_scores",
    "monitor_series",
    "no_progress",
    "parse_arguments",
    "steps_of",
    "streak",
    "test_repeat",
    "tool_key",
]

MONITORS = ("streak", "no_progress", "edit_revert", "test_repeat", "diversity", "hedge")
MONITOR_HELP = {
    "streak": "the same call (tool and arguments) in a row, 5 = 1.00",
    "no_progress": "of the last 10 calls, repeats with the same result, 5 = 1.00",
    "edit_revert": "files edited back (1 each), edit -> error -> edit (0.5); 2 = 1.00",
    "test_repeat": "the same failure again: repeats, 3 = 1.00",
    "diversity": "few distinct tools in the last 5 calls: 1 tool = 1.00",
    "hedge": "retractions, or hedging that rises late",
}
"""What each score measures, one line per monitor, for ``ctx stats`` and ``ctx report``."""

NO_PROGRESS_WINDOW = 10
""":func:`no_progress` looks at this many trailing calls."""


@dataclass(frozen=True, kw_only=True)
class StuckRule:
    """When the monitors say an agent is going round in circles (``nudge_early_exit``'s rule).

    Stuck: ``streak`` above ``streak``, or ``hedge`` above ``hedge`` while ``diversity``
    is above ``diversity``. The stage's options default to these thresholds.
    """

    streak: float = 0.7
    hedge: float = 0.6
    diversity: float = 0.5


def looks_stuck(scores: Mapping[str, float], rule: StuckRule | None = None) -> bool:
    """True if ``scores`` (see :func:`monitor_scores`) meet ``rule`` (default: the stage's)."""
    rule = rule or StuckRule()
    return scores.get("streak", 0.0) > rule.streak or (
        scores.get("hedge", 0.0) > rule.hedge and scores.get("diversity", 0.0) > rule.diversity
    )


@dataclass(frozen=True)
class Step:
    """One tool call of the agent and what came back."""

    action: str
    arguments: Any
    thought: str = ""
    observation: str = ""
    is_error: bool = False


class _ReadStep(Step):
    """A step of a loaded conversation: its observation is read from its results when asked.

    A large transcript's long results stay in the input until read (lazy blocks), and
    the monitors look at one step's observation at a time: holding every step's would
    hold them all at once (``ctx stats`` on a 1 GB session: the whole input again).
    """

    results: tuple[Block, ...]

    def __init__(
        self,
        action: str,
        arguments: Any,
        thought: str,
        results: tuple[Block, ...],
        is_error: bool,
    ) -> None:
        for name, value in (
            ("action", action),
            ("arguments", arguments),
            ("thought", thought),
            ("results", results),
            ("is_error", is_error),
        ):
            object.__setattr__(self, name, value)

    @property
    def observation(self) -> str:
        return "\n".join(r.text for r in self.results)

    def __repr__(self) -> str:
        return (
            f"Step(action={self.action!r}, arguments={self.arguments!r}, "
            f"thought={self.thought!r}, observation={self.observation!r}, "
            f"is_error={self.is_error!r})"
        )


def parse_arguments(text: str) -> Any:
    """Tool-call arguments as data: the parsed JSON, or the text when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


_ERROR_START = re.compile(
    r"^\s*(?:<returncode>[1-9]\d*</returncode>|error\b|exit code [1-9]|traceback \(most recent|"
    r"fatal:|no replacement was performed|\w+(?:error|exception)\b)",
    re.IGNORECASE,
)


def looks_failed(observation: str) -> bool:
    """True if a tool result reads as a failure even without an is_error flag."""
    return _ERROR_START.match(observation[:300]) is not None


def steps_of(conv: Conversation) -> list[Step]:
    """The agent's tool calls in order, with their thoughts and results.

    A thought is the text and thinking of the assistant response that made the call;
    it goes with the response's first call. Responses without calls pass their
    thought on to the next call (or to the last step), so no hedging is lost.
    """
    steps: list[_ReadStep] = []
    pending: list[str] = []
    for rnd in conv.rounds():
        texts = [
            b.text
            for mi in rnd.assistant
            for b in conv.messages[mi].blocks
            if b.kind in (Kind.TEXT, Kind.THINKING) and b.text.strip()
        ]
        pending.extend(texts)
        for mi in rnd.assistant:
            for bi, block in enumerate(conv.messages[mi].blocks):
                if block.kind is not Kind.TOOL_CALL:
                    continue
                results = tuple(conv.block(r) for r in conv.results_of((mi, bi)))
                steps.append(
                    _ReadStep(
                        block.name or "",
                        parse_arguments(block.text),
                        "\n".join(pending),
                        results,
                        any(r.is_error for r in results) or looks_failed(_start(results)),
                    )
                )
                pending = []
    if pending and steps:
        last = steps[-1]
        steps[-1] = _ReadStep(
            last.action,
            last.arguments,
            "\n".join([last.thought, *pending]).strip(),
            last.results,
            last.is_error,
        )
    return list[Step](steps)


def _start(results: Sequence[Block]) -> str:
    """The start of the observation of ``results``: enough for :func:`looks_failed`."""
    parts: list[str] = []
    chars = 0
    for r in results:
        parts.append(r.text[:300])
        chars += len(parts[-1]) + 1
        if chars > 300:
            break
    return "\n".join(parts)


def _clip(x: float) -> float:
    return max(0.0, min(1.0, x))


def _signature(step: Step) -> str:
    args = step.arguments
    if isinstance(args, str):
        body = args.strip()
    else:
        body = json.dumps(args, sort_keys=True, ensure_ascii=False)
    return f"{step.action}\x1f{body}"


def streak(steps: Sequence[Step]) -> float:
    """Identical trailing actions (tool and arguments), when at least two, divided by 5."""
    if len(steps) < 2:
        return 0.0
    last = _signature(steps[-1])
    run = 0
    for step in reversed(steps):
        if _signature(step) != last:
            break
        run += 1
    return _clip(run / 5) if run >= 2 else 0.0


def _outcome(step: Step) -> str:
    """A step's call and what came back, as one key: equal keys taught the agent nothing new."""
    return f"{_signature(step)}\x1e{_digest(step.observation)}"


def no_progress(steps: Sequence[Step]) -> float:
    """Of the last 10 calls, those repeating an earlier call with the same result, / 5.

    A finished session makes many calls, and a few repeats (a second ``git status``);
    an agent going round in circles calls the same thing and reads the same answer.
    """
    seen: set[str] = set()
    repeats: list[bool] = []
    for step in steps:
        key = _outcome(step)
        repeats.append(key in seen)
        seen.add(key)
    return _clip(sum(repeats[-NO_PROGRESS_WINDOW:]) / 5)


# -- edit_revert ----------------------------------------------------------------------

_PATH_KEYS = ("file_path", "path", "filename", "file", "target_file", "filepath", "notebook_path")
_OLD_KEYS = ("old_string", "old_str", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new_text", "replace")
_CONTENT_KEYS = ("content", "file_text", "contents", "text")
_EDIT_NAME = re.compile(r"(?i)edit|write|replace|patch|create|insert|apply")
_READ_ONLY_COMMANDS = frozenset({"view", "read", "cat", "list", "undo_edit"})


@dataclass(frozen=True)
class Edit:
    """What an edit call did to one file: replacements, or a whole new content."""

    path: str
    pairs: tuple[tuple[str, str], ...] = ()
    content: str | None = None


def _first_str(args: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def edit_of(step: Step) -> Edit | None:
    """The edit a step made, read from its (dict) arguments; None if it is no edit.

    Understands Claude Code's Edit/MultiEdit/Write (``file_path``, ``old_string``,
    ``new_string``, ``content``, ``edits``), SWE-agent's ``str_replace_editor``
    (``command``, ``path``, ``old_str``, ``new_str``, ``file_text``) and tools shaped
    like them. Arguments given as a JSON string are parsed first.
    """
    args = step.arguments
    if isinstance(args, str):
        args = parse_arguments(args)
    if not isinstance(args, dict):
        return None
    path = _first_str(args, _PATH_KEYS)
    if path is None:
        return None
    command = args.get("command")
    if isinstance(command, str) and command.strip().lower() in _READ_ONLY_COMMANDS:
        return None
    pairs: list[tuple[str, str]] = []
    old, new = _first_str(args, _OLD_KEYS), _first_str(args, _NEW_KEYS)
    if old is not None and new is not None:
        pairs.append((old, new))
    edits = args.get("edits")
    if isinstance(edits, list):
        for item in edits:
            if isinstance(item, dict):
                o, n = _first_str(item, _OLD_KEYS), _first_str(item, _NEW_KEYS)
                if o is not None and n is not None:
                    pairs.append((o, n))
    content = _first_str(args, _CONTENT_KEYS)
    if pairs or content is not None or _EDIT_NAME.search(step.action):
        return Edit(path, tuple(pairs), content)
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def edit_revert_events(steps: Sequence[Step]) -> tuple[int, int]:
    """(reverts, edit->error->edit cycles) in ``steps``.

    A revert is a replacement that undoes an earlier one on the same file
    (old and new swapped), or a write of a content the file had before but not
    just now. A cycle is an edit that failed, or was followed by a failing step,
    and then another edit of the same file.
    """
    last = (0, 0)
    for last in _edit_revert_running(steps):  # noqa: B007 - the final totals are wanted
        pass
    return last


def _edit_revert_running(steps: Sequence[Step]) -> Iterator[tuple[int, int]]:
    """(reverts, cycles) of ``steps[: i + 1]`` for each ``i``, in one pass.

    Step ``i`` looks at step ``i + 1`` only to decide what a *later* edit of its file
    counts, so the running totals equal :func:`edit_revert_events` of each prefix.
    """
    reverts = cycles = 0
    applied: dict[str, set[tuple[str, str]]] = {}
    contents: dict[str, list[str]] = {}
    failed_edit: dict[str, bool] = {}
    for i, step in enumerate(steps):
        edit = edit_of(step)
        if edit is None:
            yield reverts, cycles
            continue
        path = edit.path
        if failed_edit.get(path):
            cycles += 1
        done = applied.setdefault(path, set())
        for old, new in edit.pairs:
            if old != new and (new, old) in done:
                reverts += 1
            done.add((old, new))
        if edit.content is not None:
            history = contents.setdefault(path, [])
            digest = _digest(edit.content)
            if digest in history[:-1] and history[-1] != digest:
                reverts += 1
            history.append(digest)
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        failed_edit[path] = step.is_error or (
            nxt is not None and nxt.is_error and _edit_path(nxt) != path
        )
        yield reverts, cycles


def _edit_path(step: Step) -> str | None:
    edit = edit_of(step)
    return edit.path if edit else None


def edit_revert(steps: Sequence[Step]) -> float:
    """Reverts count 1, edit -> error -> edit cycles 0.5; the sum divided by 2."""
    reverts, cycles = edit_revert_events(steps)
    return _clip((reverts + 0.5 * cycles) / 2)


# -- test_repeat ----------------------------------------------------------------------

_FAILURE_LINE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|^FAILED\b|^ERROR\b|\berror:|\bfatal:", re.MULTILINE
)
# Evidence that a step without an error flag still ran something that failed; a file
# listing that merely mentions ValueError is not a failure.
_FAILED_RUN = re.compile(
    r"Traceback \(most recent call last\)|^FAILED |^=+ .*\b\d+ (?:failed|errors?)\b|"
    r"<returncode>[1-9]\d*</returncode>",
    re.MULTILINE,
)
# Lines that say a command failed but not how: never a signature on their own.
_GENERIC_LINE = re.compile(
    r"^\s*(?:</?[\w-]+>(?:\d*</[\w-]+>)?|exit code:? -?\d+|error:?|command failed)?\s*$",
    re.IGNORECASE,
)
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def _may_have_failed(text: str) -> bool:
    # Every branch of _FAILED_RUN needs one of these words; ``in`` scans at memory
    # speed, the regex (no literal prefix) at a few tens of MB/s.
    return (
        "Traceback" in text
        or "FAILED " in text
        or "<returncode>" in text
        or "failed" in text
        or "error" in text
    )


def _may_be_failure(line: str) -> bool:
    # Likewise for _FAILURE_LINE, one line at a time.
    return (
        "Error" in line
        or "Exception" in line
        or line.startswith(("FAILED", "ERROR"))
        or "error:" in line
        or "fatal:" in line
    )


def failure_signature(step: Step) -> str | None:
    """The normalised last failure line of a failed step, or None.

    Numbers, addresses and whitespace are normalised so the same failure at
    another line number, duration or memory address gives the same signature.
    """
    text = step.observation
    if not step.is_error and not (_may_have_failed(text) and _FAILED_RUN.search(text)):
        return None
    # The last failure line is the signature: search from the end and stop there
    # (matching every line of a long log was most of the time of `ctx stats`).
    last = next(
        (
            ln
            for ln in reversed(text.splitlines())
            if _may_be_failure(ln) and _FAILURE_LINE.search(ln)
        ),
        None,
    )
    if last is None and step.is_error:
        last = next((ln for ln in text.splitlines() if not _GENERIC_LINE.match(ln)), None)
    if last is None:
        return None
    line = _HEX.sub("<hex>", last.strip())
    line = _NUMBER.sub("<n>", line)
    return _SPACE.sub(" ", line).lower()[:200]


def test_repeat(steps: Sequence[Step]) -> float:
    """(repeats of the most frequent failure signature - 1) / 3."""
    counts = Counter(s for s in map(failure_signature, steps) if s)
    if not counts:
        return 0.0
    return _clip((counts.most_common(1)[0][1] - 1) / 3)


# -- diversity ------------------------------------------------------------------------

_SHELL_SPLIT = re.compile(r"&&|\|\||;|\|")


def tool_key(step: Step) -> str:
    """The tool of a step, refined by its sub-command for shell-like tools.

    Agents with one ``bash`` tool would otherwise always look stuck: ``bash:grep``
    and ``bash:sed`` are different tools for this purpose.
    """
    args = step.arguments
    command = None
    if isinstance(args, dict):
        value = args.get("command", args.get("cmd"))
        command = value if isinstance(value, str) else None
    if command is None:
        return step.action
    for part in _SHELL_SPLIT.split(command):
        words = part.split()
        if words and words[0] != "cd":
            return f"{step.action}:{words[0]}"
    return step.action


def diversity(steps: Sequence[Step]) -> float:
    """Low diversity of the last 5 actions over >= 8 actions: 1 - (distinct tools - 1) / 4."""
    if len(steps) < 8:
        return 0.0
    distinct = len({tool_key(s) for s in steps[-5:]})
    return _clip(1 - (distinct - 1) / 4)


# -- hedge ----------------------------------------------------------------------------

_RETRACTIONS = re.compile(
    r"\b(?:i was wrong|that was wrong|my mistake|i apologi[sz]e|let me reconsider|let me rethink|"
    r"let me revert|revert (?:that|this|my)|undo (?:that|this|my)|(?:that|this|it) did(?:n't| not) work|"
    r"still (?:fail(?:s|ing)?|not working|broken)|same error|(?:this|that) (?:isn't|is not) working|"
    r"try a different approach|(?:i'm|i am) stuck|going (?:in|around in) circles|"
    r"not making progress|back to square one)\b",
    re.IGNORECASE,
)
_HEDGES = re.compile(
    r"\b(?:maybe|perhaps|might|possibly|probably|not sure|unsure|unclear|i think|i guess|"
    r"seems?|it appears|could be|hopefully|not certain)\b",
    re.IGNORECASE,
)


def hedge(steps: Sequence[Step]) -> float:
    """The larger of retraction density and hedging rise, both over the thoughts.

    Retractions: thoughts in the late half holding a retraction phrase, divided by
    the larger of 3 and 30% of the late thoughts. Rise: hedging words per 100 words
    in the late half minus the early half, divided by 2 (needs 50 words per half).
    """
    thoughts = [s.thought for s in steps if s.thought.strip()]
    if not thoughts:
        return 0.0
    half = len(thoughts) // 2
    early, late = thoughts[:half], thoughts[half:]
    hits = sum(1 for t in late if _RETRACTIONS.search(t))
    retraction = hits / max(3.0, 0.3 * len(late))
    rise = 0.0
    early_words = sum(len(t.split()) for t in early)
    late_words = sum(len(t.split()) for t in late)
    if early_words >= 50 and late_words >= 50:
        early_rate = 100 * sum(len(_HEDGES.findall(t)) for t in early) / early_words
        late_rate = 100 * sum(len(_HEDGES.findall(t)) for t in late) / late_words
        rise = (late_rate - early_rate) / 2
    return _clip(max(retraction, rise))


def monitor_scores(steps: Sequence[Step]) -> dict[str, float]:
    """All six monitors, in the order of :data:`MONITORS`."""
    return {
        "streak": streak(steps),
        "no_progress": no_progress(steps),
        "edit_revert": edit_revert(steps),
        "test_repeat": test_repeat(steps),
        "diversity": diversity(steps),
        "hedge": hedge(steps),
    }


def conversation_monitors(conv: Conversation) -> dict[str, float]:
    """The six monitors of a conversation, rounded to 3 decimals (for reports)."""
    return {k: round(v, 3) for k, v in monitor_scores(steps_of(conv)).items()}


def monitor_series(steps: Sequence[Step], points: int = 200) -> list[tuple[int, dict[str, float]]]:
    """The six monitors as the session went on: ``(k, monitor_scores(steps[:k]))``.

    ``k`` runs over at most ``points`` evenly spaced step counts, always ending with
    ``len(steps)`` (so the last scores are the session's). Computed in one pass over
    the steps, not once per prefix: a long session has tens of thousands of steps.
    """
    n = len(steps)
    if n == 0:
        return []
    stride = max(1, -(-n // max(1, points)))
    wanted = set(range(stride, n + 1, stride)) | {n}
    thoughts_seen: list[tuple[bool, int, int]] = []  # (retraction, words, hedges) per thought
    failures: Counter[str] = Counter()
    worst = 0
    run = 0
    previous: str | None = None
    keys: list[str] = []
    outcomes: set[str] = set()
    repeats: list[bool] = []
    out: list[tuple[int, dict[str, float]]] = []
    edits = _edit_revert_running(steps)
    for i, step in enumerate(steps):
        sig = _signature(step)
        run = run + 1 if sig == previous else 1
        previous = sig
        keys.append(tool_key(step))
        outcome = _outcome(step)
        repeats.append(outcome in outcomes)
        outcomes.add(outcome)
        failure = failure_signature(step)
        if failure:
            failures[failure] += 1
            worst = max(worst, failures[failure])
        if step.thought.strip():
            t = step.thought
            thoughts_seen.append(
                (_RETRACTIONS.search(t) is not None, len(t.split()), len(_HEDGES.findall(t)))
            )
        reverts, cycles = next(edits)
        k = i + 1
        if k not in wanted:
            continue
        scores = {
            "streak": _clip(run / 5) if k >= 2 and run >= 2 else 0.0,
            "no_progress": _clip(sum(repeats[-NO_PROGRESS_WINDOW:]) / 5),
            "edit_revert": _clip((reverts + 0.5 * cycles) / 2),
            "test_repeat": _clip((worst - 1) / 3) if worst else 0.0,
            "diversity": _clip(1 - (len(set(keys[-5:])) - 1) / 4) if k >= 8 else 0.0,
            "hedge": _hedge_of(thoughts_seen),
        }
        out.append((k, scores))
    return out


def _hedge_of(thoughts: Sequence[tuple[bool, int, int]]) -> float:
    """:func:`hedge` from per-thought (retraction, words, hedges) counts."""
    if not thoughts:
        return 0.0
    half = len(thoughts) // 2
    early, late = thoughts[:half], thoughts[half:]
    retraction = sum(1 for t in late if t[0]) / max(3.0, 0.3 * len(late))
    rise = 0.0
    early_words = sum(t[1] for t in early)
    late_words = sum(t[1] for t in late)
    if early_words >= 50 and late_words >= 50:
        early_rate = 100 * sum(t[2] for t in early) / early_words
        late_rate = 100 * sum(t[2] for t in late) / late_words
        rise = (late_rate - early_rate) / 2
    return _clip(max(retraction, rise))
