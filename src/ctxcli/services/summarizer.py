"""Summarizers for the summarize stage: extractive (offline, default) and Anthropic.

A :class:`Summarizer` turns a slice of a conversation (closed under tool links, so
every result is there with its call) into the text that replaces it. Both must
either return a real summary or raise :class:`SummarizerError`: the stage then keeps
the transcript as it was. Neither ever returns a placeholder, unlike LangChain's
"Previous conversation was too long to summarize." (langchain #39261).

- :class:`ExtractiveSummarizer` builds the summary from the transcript itself: the
  user's requests, files read and written, commands with their exit status, errors
  and the assistant's last words. Deterministic, no network.
- :class:`AnthropicSummarizer` asks a Claude model through the official SDK. A
  history longer than ``chunk_tokens`` is summarized chunk by chunk and the partial
  summaries are then merged, so no request exceeds the model's window.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxcli.core.cuts import is_user_turn, render_message
from ctxcli.core.errors import ClassifierError
from ctxcli.core.hints import is_ctx_marked, is_summary
from ctxcli.core.model import Block, BlockRef, Conversation, Kind
from ctxcli.services.answer_cache import digest
from ctxcli.services.anthropic_client import (
    DEFAULT_MODEL,
    AnthropicAccess,
    describe_api_error,
    make_client,
)

if TYPE_CHECKING:
    import anthropic

    from ctxcli.services.answer_cache import AnswerCache

__all__ = [
    "AnthropicSummarizer",
    "CountTokens",
    "DEFAULT_PROMPT",
    "ExtractiveSummarizer",
    "PROMPT_VERSION",
    "Summarizer",
    "SummarizerError",
    "SummaryRequests",
    "build_summarizer",
    "pack",
]

CountTokens = Callable[[str], int]
PROMPT_VERSION = "summarize-v1"


class SummarizerError(ClassifierError):
    """A summarizer could not produce a summary; the transcript stays unchanged."""


@runtime_checkable
class Summarizer(Protocol):
    """Writes the summary of a slice of a conversation."""

    name: str

    def summarize(self, conv: Conversation, count_tokens: CountTokens) -> str:
        """The summary text of ``conv`` (raises :class:`SummarizerError` on failure)."""
        ...


# -- extractive ---------------------------------------------------------------------

# Keys that hold a file path in the arguments of common agent tools (Claude Code's
# Read/Edit/Write use file_path, OpenHands/SWE-agent editors path, Cline filePath).
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "filename", "file")
_COMMAND_KEYS = ("command", "cmd")
# SWE-agent/OpenHands str_replace_editor put the sub-command in "command" next to a
# path: that is an edit or a view, not a shell command.
_EDITOR_READS = frozenset({"view"})
_EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "undo_edit", "write"})
_WRITE_TOOL = re.compile(
    r"(?i)write|edit|create|patch|replace|insert|update|delete|remove|move|rename|append|save"
)
# Codex apply_patch sends raw patch text: the touched files are in its headers.
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_EXIT_CODE = re.compile(
    r"(?i)(?:exit(?:ed with)? (?:code|status)[: ]\s*|\"exit_code\":\s*|returncode[=: ]\s*)(-?\d+)"
)
_ERROR_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|[A-Za-z_.]*(?:Error|Exception)\b[:(]|"
    r"error(?:\[\w+\])?:|fatal:|FAILED\b|E {3}|panic:)"
)
# Text the harness injects into user turns; it is not something the user asked for.
_INJECTED = re.compile(
    r"^\s*<(system-reminder|local-command-caveat|local-command-stdout|environment_context|"
    r"user_instructions|command-message|task-notification)>"
)


@dataclass
class _Call:
    """A command run or another tool call, with its outcome when the transcript shows one."""

    text: str
    status: str | None


@dataclass
class _Facts:
    """What the extractive summary reports, gathered in one pass."""

    earlier: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    reads: dict[str, None] = field(default_factory=dict)
    writes: dict[str, None] = field(default_factory=dict)
    commands: list[_Call] = field(default_factory=list)
    other_calls: list[_Call] = field(default_factory=list)
    tools: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    last_assistant: str = ""


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _command_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # Codex shell calls: ["bash", "-lc", "<script>"]; the script is what ran.
        if len(value) >= 3 and value[-2] in ("-c", "-lc"):
            return str(value[-1])
        return " ".join(value)
    return None


def _common_dir(paths: Sequence[str]) -> str:
    """The deepest directory all absolute paths share, if deeper than two levels."""
    if len(paths) < 2 or not all(p.startswith("/") for p in paths):
        return ""
    base = posixpath.commonpath(paths)
    if base.count("/") < 3:
        return ""
    if base in paths and not any(p.startswith(base + "/") for p in paths if p != base):
        return ""
    return base + "/"


def _relative(path: str, base: str) -> str:
    if not base:
        return path
    return path[len(base) :] if path.startswith(base) else "."


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()}… [{len(text) - limit} more chars]"


def _status(results: Sequence[Block]) -> str | None:
    """``exit N`` or ``error`` when the results say so; None when they do not tell."""
    if not results:
        return "no result"
    for block in results:
        match = _EXIT_CODE.search(block.text)
        if match:
            return f"exit {match.group(1)}"
    if any(b.is_error or _first_error(b) for b in results):
        return "error"
    return None


def _first_error(block: Block) -> str | None:
    """The line of a result that best says what went wrong, if anything did."""
    lines = [line.strip() for line in block.text.splitlines() if line.strip()]
    flagged = [line for line in lines if _ERROR_LINE.match(line)]
    if flagged:
        # The last flagged line of a traceback names the exception.
        return flagged[-1]
    if block.is_error and lines:
        # "Exit code 1" alone says little: add the line after it.
        return " / ".join(lines[:2]) if len(lines[0]) < 40 else lines[0]
    return None


class ExtractiveSummarizer:
    """Builds the summary from the transcript's own text; offline and deterministic.

    Args:
        max_requests: user requests quoted (the first few and the latest).
        max_items: entries per list (files, commands, errors); the latest are kept.
    """

    name = "extractive"

    def __init__(self, *, max_requests: int = 8, max_items: int = 25) -> None:
        self.max_requests = max_requests
        self.max_items = max_items

    def summarize(self, conv: Conversation, count_tokens: CountTokens) -> str:
        """The summary of ``conv``; never fails on well-formed messages."""
        facts = self._gather(conv)
        return "\n".join(self._render(facts)).strip()

    def _gather(self, conv: Conversation) -> _Facts:
        facts = _Facts()
        for mi, msg in enumerate(conv.messages):
            if msg.role == "user" and is_user_turn(msg):
                for block in msg.blocks:
                    if block.kind is not Kind.TEXT or not block.text.strip():
                        continue
                    if is_summary(block.text):
                        facts.earlier.append(block.text.split("\n", 1)[-1].strip())
                    elif not _INJECTED.match(block.text) and not is_ctx_marked(block.text):
                        facts.requests.append(block.text)
            elif msg.role == "assistant" and msg.text.strip():
                facts.last_assistant = msg.text
            for bi, block in enumerate(msg.blocks):
                if block.kind is Kind.TOOL_CALL:
                    self._read_call(conv, (mi, bi), block, facts)
                elif block.kind is Kind.TOOL_RESULT:
                    error = _first_error(block)
                    if error is not None:
                        name = conv.tool_name((mi, bi)) or "tool"
                        facts.errors.append(f"{name}: {_one_line(error, 240)}")
        return facts

    def _read_call(self, conv: Conversation, ref: BlockRef, block: Block, facts: _Facts) -> None:
        name = block.name or ""
        facts.tools[name or "?"] += 1
        args = _parse_args(block.text)
        path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
        command = next(
            (c for k in _COMMAND_KEYS if (c := _command_text(args.get(k))) is not None), None
        )
        if path is not None and command in _EDITOR_READS | _EDITOR_WRITES:
            target = facts.writes if command in _EDITOR_WRITES else facts.reads
            target[path] = None
            return
        patched = _PATCH_FILE.findall(block.text.replace("\\n", "\n"))
        for file in patched:
            facts.writes[file.strip()] = None
        if path is not None:
            (facts.writes if _WRITE_TOOL.search(name) else facts.reads)[path] = None
        status = _status([conv.block(r) for r in conv.results_of(ref)])
        if command is not None:
            facts.commands.append(_Call(_one_line(command, 200), status))
        elif path is None and not patched:
            facts.other_calls.append(_Call(f"{name} {_one_line(block.text, 160)}", status))

    def _render(self, facts: _Facts) -> Iterator[str]:
        yield "Summary of the earlier conversation (extracted from the transcript):"
        for text in facts.earlier:
            yield ""
            yield "Earlier summary:"
            yield text
        if facts.requests:
            yield ""
            yield f"User requests ({len(facts.requests)}, oldest first):"
            yield from self._requests(facts.requests)
        if facts.tools:
            yield ""
            yield "Tools used: " + ", ".join(f"{n} x{c}" for n, c in facts.tools.most_common())
        yield from self._files(facts)
        for title, calls, quote in (
            ("Commands run", facts.commands, "`"),
            ("Other tool calls", facts.other_calls, ""),
        ):
            if calls:
                yield ""
                shown = calls[-self.max_items :]
                yield self._title(title, len(shown), len(calls))
                for call in shown:
                    outcome = f" -> {call.status}" if call.status else ""
                    yield f"- {quote}{call.text}{quote}{outcome}"
        if facts.errors:
            yield ""
            unique = list(dict.fromkeys(facts.errors))
            shown_errors = unique[-self.max_items :]
            yield self._title("Errors seen", len(shown_errors), len(unique))
            yield from (f"- {e}" for e in shown_errors)
        if facts.last_assistant:
            yield ""
            yield "Last assistant message:"
            yield _clip(facts.last_assistant, 1500)

    def _requests(self, requests: list[str]) -> Iterator[str]:
        # The first requests state the goal, the last ones where things stand.
        head = max(1, self.max_requests // 3)
        tail = self.max_requests - head
        if len(requests) <= self.max_requests:
            picked = list(enumerate(requests))
        else:
            picked = list(enumerate(requests))[:head] + list(enumerate(requests))[-tail:]
        previous = -1
        for i, text in picked:
            if i != previous + 1:
                yield f"  ({i - previous - 1} more requests in between)"
            yield f"{i + 1}. {_clip(text, 600)}"
            previous = i

    def _files(self, facts: _Facts) -> Iterator[str]:
        everything = [*facts.reads, *facts.writes]
        if not everything:
            return
        base = _common_dir(everything)
        if base:
            yield ""
            yield f"Files (paths relative to {base}):"
        for title, paths in (("Files read", facts.reads), ("Files written", facts.writes)):
            if paths:
                if not base:
                    yield ""
                shown = [_relative(p, base) for p in paths]
                yield self._list_line(title, shown)

    def _list_line(self, title: str, items: list[str]) -> str:
        shown = items[-self.max_items :]
        more = f" (+{len(items) - len(shown)} earlier)" if len(shown) < len(items) else ""
        return f"{title}: {', '.join(shown)}{more}"

    @staticmethod
    def _title(title: str, shown: int, total: int) -> str:
        return f"{title} (last {shown} of {total}):" if shown < total else f"{title}:"


# -- Anthropic ------------------------------------------------------------------------

DEFAULT_PROMPT = """\
You summarize the earlier part of an AI agent's session so the agent can continue its work
without it. Write a compact summary in plain text that keeps:
- the user's goals, requests and constraints (quote exact requirements and names);
- decisions taken and why;
- files read, created or modified (full paths);
- commands run and their outcome (exit status, the key lines of output);
- errors that are still open, and errors that were fixed;
- the current state: what was done last and what remains to do.
State only what the transcript shows. A message that starts with "[ctx: summary of" is an
earlier summary: carry its content forward. Reply with the summary only."""

_PART_NOTE = "This is part {i} of {n} of the transcript; summarize this part only.\n\n"
_MERGE_NOTE = (
    "Below are summaries of consecutive parts of one session, oldest first. Merge them into "
    "one summary, keeping everything the instructions ask for; later parts win on conflicts.\n\n"
)


@dataclass(frozen=True, kw_only=True)
class SummaryRequests:
    """How :class:`AnthropicSummarizer` asks (the ``summarize`` stage's options).

    Attributes:
        model: the Claude model.
        base_url: the API's address (default: the SDK's, or ``ANTHROPIC_BASE_URL``).
        prompt: the instructions (default: :data:`DEFAULT_PROMPT`).
        chunk_tokens: a request holds at most this much transcript.
        summary_max_tokens: the longest summary a request may return.
        timeout_seconds: how long one request may take.
        max_retries: the SDK's retries of a failed request.
    """

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    prompt: str | None = None
    chunk_tokens: int = 50_000
    summary_max_tokens: int = 2_000
    timeout_seconds: float = 60.0
    max_retries: int = 2


class AnthropicSummarizer:
    """Summarizes with a Claude model, in chunks that fit ``chunk_tokens``.

    Every request failure (no key, timeout, HTTP error after the SDK's retries, a
    malformed or empty reply) raises :class:`SummarizerError`. Replies are cached
    (``cache``) by model, prompt and input, so ``ctx stats`` followed by ``ctx
    reduce`` asks once.
    """

    name = "anthropic"
    NAMESPACE = "summarize"

    def __init__(
        self,
        *,
        access: AnthropicAccess | None = None,
        cache: AnswerCache | None = None,
        requests: SummaryRequests | None = None,
    ) -> None:
        requests = requests or SummaryRequests()
        self.access = access or AnthropicAccess.from_env()
        self.cache = cache
        self.model = requests.model
        self.base_url = requests.base_url
        self.prompt = requests.prompt or DEFAULT_PROMPT
        self.chunk_tokens = requests.chunk_tokens
        self.summary_max_tokens = requests.summary_max_tokens
        self.timeout_seconds = requests.timeout_seconds
        self.max_retries = requests.max_retries
        self._client: anthropic.Anthropic | None = None

    def summarize(self, conv: Conversation, count_tokens: CountTokens) -> str:
        """Summarize ``conv``: one request, or one per chunk plus merge requests."""
        if not self.access.api_key:
            raise SummarizerError(
                'ANTHROPIC_API_KEY is not set; set it, or use summarizer = "extractive" (offline)'
            )

        def name(mi: int, bi: int) -> str | None:
            return conv.tool_name((mi, bi))

        units = [render_message(i, m, name) for i, m in enumerate(conv.messages)]
        chunks = list(pack(units, self.chunk_tokens, count_tokens))
        if len(chunks) == 1:
            return self._ask(_transcript(chunks[0]))
        parts = [
            self._ask(_PART_NOTE.format(i=i, n=len(chunks)) + _transcript(chunk))
            for i, chunk in enumerate(chunks, start=1)
        ]
        # Merge until one summary is left; each merge request holds at least two
        # summaries (chunk_tokens >= 4 * summary_max_tokens), so this ends.
        while len(parts) > 1:
            groups = list(pack(parts, self.chunk_tokens, count_tokens, min_per_chunk=2))
            parts = [
                self._ask(f"{_MERGE_NOTE}<summaries>\n{group}\n</summaries>") for group in groups
            ]
        return parts[0]

    def close(self) -> None:
        """Close the HTTP client, if one was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _ask(self, text: str) -> str:

        key = digest(PROMPT_VERSION, self.model, str(self.summary_max_tokens), self.prompt, text)
        if self.cache is not None:
            hit = self.cache.get(self.NAMESPACE, key)
            if isinstance(hit, str) and hit.strip():
                return hit
        summary = self._request(text)
        if self.cache is not None:
            self.cache.put(self.NAMESPACE, key, summary)
        return summary

    def _request(self, text: str) -> str:

        try:
            if self._client is None:
                self._client = make_client(
                    self.access,
                    base_url=self.base_url,
                    timeout_seconds=self.timeout_seconds,
                    max_retries=self.max_retries,
                )
            reply = self._client.messages.create(
                model=self.model,
                max_tokens=self.summary_max_tokens,
                system=self.prompt,
                messages=[{"role": "user", "content": text}],
            )
            content = reply.content
            summary = "".join(
                getattr(b, "text", "") or "" for b in content if getattr(b, "type", "") == "text"
            )
        except Exception as exc:  # the SDK's errors, a malformed body: all one failure
            raise SummarizerError(f"Anthropic summary failed: {describe_api_error(exc)}") from None
        if not summary.strip():
            raise SummarizerError("Anthropic summary failed: the reply was empty")
        return summary.strip()


def _transcript(text: str) -> str:
    return f"<transcript>\n{text}\n</transcript>"


def pack(
    units: Sequence[str], budget: int, count_tokens: CountTokens, *, min_per_chunk: int = 1
) -> Iterator[str]:
    """Join ``units`` into chunks of at most ``budget`` tokens, in order.

    A unit bigger than the budget is shortened to its head and tail (the summary
    cites the offload file that keeps all of it). ``min_per_chunk`` forces progress
    when merging summaries.
    """
    current: list[str] = []
    used = 0
    for unit in units:
        tokens = count_tokens(unit)
        if tokens > budget:
            unit = _shorten(unit, budget, tokens)
            tokens = count_tokens(unit)
        if current and used + tokens > budget and len(current) >= min_per_chunk:
            yield "\n\n".join(current)
            current, used = [], 0
        current.append(unit)
        used += tokens
    if current:
        yield "\n\n".join(current)


def _shorten(text: str, budget: int, tokens: int) -> str:
    # Characters scale with tokens closely enough; aim under the budget with margin.
    keep = max(200, int(len(text) * budget / tokens * 0.8))
    head = keep // 2
    omitted = len(text) - keep
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - (keep - head) :]}"


def build_summarizer(
    name: str,
    *,
    given: Summarizer | None = None,
    access: AnthropicAccess | None = None,
    cache: AnswerCache | None = None,
    **options: Any,
) -> Summarizer:
    """The summarizer a stage asked for, with the services the run provides.

    ``given`` (a ready object, e.g. a test double) wins; otherwise ``name`` picks the
    implementation and ``access`` / ``cache`` supply API access and the reply cache.
    """
    if given is not None:
        if not isinstance(given, Summarizer):
            raise TypeError("the summarizer given must have a summarize(conv, count) method")
        return given
    if name == "extractive":
        return ExtractiveSummarizer()
    if name == "anthropic":
        return AnthropicSummarizer(access=access, cache=cache, requests=SummaryRequests(**options))
    raise ValueError(f"unknown summarizer {name!r}")
