"""Rebuild what each API call of a Claude Code session sent, from its records.

A call's input is the chain of records before its first record: follow ``parentUuid``
to the root. A ``compact_boundary`` has no parent, so after a compaction the chain
restarts at the summary, as the client's context does. Where a parent is missing (a
malformed line, cc_mclaude_c76e5be5 line 859) the chain goes on from the record just
before in the file.

Parallel tool results hang off the chain in v2.1.6 (T1..Tn, then R1..Rn with
Rk.parentUuid = Tk; only Rn continues it): a result the chain lacks is put back before
the next result the chain has, or at its end, as the API message held them all.

Consecutive records of one role are one API message (the client merges them); the
client's system prompt and tools come first, in a hidden block whose size is
calibrated. Claude Code sets ``cache_control`` on its system prompt and on the last
message.

The API drops the thinking blocks of every assistant message before the last user
message that holds anything but tool results (a new turn): they are neither read nor
billed nor part of the cached prefix. So at a turn start the previous turn's thinking
leaves the prompt, the prefix changes at its first thinking block, and the request can
read only an entry that ends before it and lies within the 20-block lookback (after a
long turn: only the system prompt's).

Yet after most completed turns the next turn reads the whole previous turn, thinking
stripped: a prefix no logged request sent (cc_mclaude_c76e5be5 line 488 reads 71,628
tokens of a 71,648-token prompt, shorter than the request before it). The client sends
a request after a completed turn that the file does not log, and it writes that prefix.
A request gets its time (``Request.post_turn_at``: when the turn ended) when the turn
before it ended with the model's text (not cut off by an interruption or a tool call)
and its new message was not queued while the model worked (a ``queue-operation``
record holds it: a task notification, sent the moment the turn ends, before any such
request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.cost._calls import SYNTHETIC_MODEL, Call
from ctxcli.cost._jsonl import iter_dicts, seconds
from ctxcli.cost.blocks import BlockMemo, content_block, content_items
from ctxcli.cost.cache import TTL
from ctxcli.cost.sequence import Block, BuildOptions, Request, block_key

Records = Sequence[tuple[int, dict[str, Any]]]


def claude_code_requests(
    records: Records, calls: Sequence[Call], options: BuildOptions
) -> list[Request]:
    """The requests of ``calls``, each with the messages before it."""
    ttl: TTL = options.ttl or ("1h" if any(c.usage.cache_write_1h for c in calls) else "5m")
    chains = _Chains(records)
    memo: BlockMemo = {}
    requests = []
    for call in calls:
        messages = chains.messages_before(call.index)
        sent = chains.sent_at(call.index)
        agent = records[call.index][1].get("agentId")
        hidden = Block(block_key("claude_code:client prompt", str(agent or "")), hidden=True)
        blocks, marks = message_blocks(hidden, messages, options.message_breakpoints, ttl, memo)
        post_turn = chains.turn_end(call.index) if _completed_turn(messages) else None
        requests.append(
            Request(
                key=call.key,
                at=sent if sent is not None else call.at,
                model=call.model,
                blocks=blocks,
                breakpoints=marks,
                output_tokens=call.usage.output,
                recorded=call.usage,
                messages=tuple(messages),
                post_turn_at=post_turn,
            )
        )
    return requests


def message_blocks(
    hidden: Block,
    messages: Sequence[dict[str, Any]],
    trailing: int,
    ttl: TTL,
    memo: BlockMemo | None = None,
    mark: int | None = None,
) -> tuple[tuple[Block, ...], tuple[tuple[int, TTL], ...]]:
    """Build the cache blocks of a Claude Code request and its breakpoints.

    The blocks of Anthropic ``messages`` after the client's hidden prompt, and the
    breakpoints Claude Code sets: its system prompt and the last block of the last
    ``trailing`` messages (and of message ``mark``, when given). ``memo`` keeps the
    block of each content object seen (the same objects come back request after
    request).
    """
    memo = {} if memo is None else memo
    blocks: list[Block] = [hidden]
    ends: list[int] = []
    for message in sent_messages(messages):
        role = str(message.get("role"))
        for item in content_items(message.get("content")):
            hit = memo.get(id(item))
            if hit is None or hit[0] is not item:
                hit = memo[id(item)] = (item, content_block(role, item))
            blocks.append(hit[1])
        ends.append(len(blocks) - 1)
    marks = [0] + ends[-trailing:] if trailing else [0]
    if mark is not None and 0 <= mark < len(ends) and ends[mark] > 0:
        marks.append(ends[mark])
    return tuple(blocks), tuple((i, ttl) for i in sorted(set(marks)))


_THINKING = frozenset({"thinking", "redacted_thinking"})


def _is_thinking(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") in _THINKING


def sent_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as the API reads them: no thinking in the turns before the last one.

    A message that loses its thinking is a new dict; its other items are the same objects.
    """
    turn = _turn_start(messages)
    out: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        if n < turn and message.get("role") == "assistant":
            items = content_items(message.get("content"))
            kept = [item for item in items if not _is_thinking(item)]
            if len(kept) != len(items):
                message = {**message, "content": kept}
        out.append(message)
    return out


def _turn_start(messages: Sequence[dict[str, Any]]) -> int:
    """The index of the last user message holding more than tool results (0: none)."""
    for n in range(len(messages) - 1, -1, -1):
        message = messages[n]
        if message.get("role") != "user":
            continue
        items = content_items(message.get("content"))
        if any(not (isinstance(i, dict) and i.get("type") == "tool_result") for i in items):
            return n
    return 0


def _completed_turn(messages: Sequence[dict[str, Any]]) -> bool:
    """The last message starts a turn and the one before it ended a turn with text."""
    n = len(messages) - 1
    if n < 1 or _turn_start(messages) != n or messages[n - 1].get("role") != "assistant":
        return False
    items = content_items(messages[n - 1].get("content"))
    return bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == "text"


def _text(record: dict[str, Any]) -> str | None:
    """The first text a user record holds (its string content, or its first text block)."""
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    return next((str(b["text"]) for b in iter_dicts(content) if b.get("type") == "text"), None)


class _Chains:
    """The uuid tree of one file, and the API messages along any chain of it."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self.by_uuid: dict[str, int] = {}
        self.before: dict[int, int] = {}  # record -> the uuid-bearing record before it
        self.result_at: dict[str, int] = {}  # tool_use id -> record holding its result
        self.queued: set[str] = set()  # messages queued while the model worked
        last = -1
        for i, (_, record) in enumerate(records):
            if record.get("type") == "queue-operation" and isinstance(record.get("content"), str):
                self.queued.add(record["content"])
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                self.by_uuid.setdefault(uuid, i)
                self.before[i] = last
                last = i
            for tid in _result_ids(record):
                self.result_at.setdefault(tid, i)
        self._content: dict[int, list[Any]] = {}

    def chain(self, start: int) -> list[int]:
        """Records before ``start`` along its parents, root first."""
        out: list[int] = []
        cur = start
        for _ in range(len(self.records)):
            parent = self.records[cur][1].get("parentUuid")
            if not isinstance(parent, str):
                break
            nxt = self.by_uuid.get(parent, self.before.get(cur, -1))
            if nxt < 0:
                break
            out.append(nxt)
            cur = nxt
        out.reverse()
        return out

    def sent_at(self, start: int) -> float | None:
        """Return when the call starting at record ``start`` was sent.

        When the call whose first record is ``start`` was sent: when its input was
        complete, i.e. the time of the record it answers (its response is logged later).
        """
        parent = self.records[start][1].get("parentUuid")
        i = self.by_uuid.get(parent, -1) if isinstance(parent, str) else -1
        return seconds(self.records[i][1].get("timestamp")) if i >= 0 else None

    def turn_end(self, start: int) -> float | None:
        """When the turn before the call starting at record ``start`` ended.

        The time of the last assistant record on its chain; None when the user records
        after it were queued while the model worked (sent at once when the turn ended).
        """
        chain = self.chain(start)
        for i in reversed(chain):
            record = self.records[i][1]
            if record.get("type") == "assistant":
                return seconds(record.get("timestamp"))
            if record.get("type") == "user" and self._was_queued(_text(record)):
                return None
        return None

    def _was_queued(self, text: str | None) -> bool:
        """``text`` starts with a message the client queued (several are sent as one)."""
        return text is not None and any(text.startswith(q) for q in self.queued)

    def messages_before(self, start: int) -> list[dict[str, Any]]:
        """Return the API messages the call starting at record ``start`` sent.

        The API messages sent with the call whose first record is ``start``: the
        records' ``message.content``, those of consecutive records of one role merged
        into one message (as the client sends them).
        """
        chain = [i for i in self.chain(start) if self._visible(i)]
        chain = self._with_lost_results(chain, start)
        runs: list[tuple[str, list[int]]] = []
        for i in chain:
            if not self._items(i):
                continue
            role = str(self.records[i][1].get("type"))
            if runs and runs[-1][0] == role:
                runs[-1][1].append(i)
            else:
                runs.append((role, [i]))
        messages: list[dict[str, Any]] = []
        for role, run in runs:
            if len(run) == 1:
                content = self.records[run[0]][1]["message"].get("content")
            else:
                content = [item for i in run for item in self._items(i)]
            messages.append({"role": role, "content": content})
        return messages

    def _items(self, i: int) -> list[Any]:
        """Return record ``i``'s content as a list of blocks, made once.

        Record ``i``'s content as a list of blocks, made once (a string becomes a text
        block: the same bytes to the API, and the same object request after request).
        """
        items = self._content.get(i)
        if items is None:
            content = self.records[i][1]["message"].get("content")
            items = self._content[i] = [
                {"type": "text", "text": c} if isinstance(c, str) else c
                for c in content_items(content)
            ]
        return items

    def _with_lost_results(self, chain: list[int], start: int) -> list[int]:
        """``chain`` with the tool results that hang off it put back in place."""
        on_chain = set(chain)
        answered = {tid for i in chain for tid in _result_ids(self.records[i][1])}
        lost: list[int] = []
        out: list[int] = []
        for i in chain:
            if _result_ids(self.records[i][1]):
                out.extend(sorted(set(lost)))
                lost = []
            out.append(i)
            for tid in _use_ids(self.records[i][1]):
                j = self.result_at.get(tid, -1)
                if tid not in answered and 0 <= j < start and j not in on_chain:
                    lost.append(j)
        out.extend(sorted(set(lost)))
        return out

    def _visible(self, i: int) -> bool:
        """Whether record ``i`` is a message the client sends to the API."""
        record = self.records[i][1]
        if record.get("type") not in ("user", "assistant"):
            return False
        message = record.get("message")
        if not isinstance(message, dict) or "content" not in message:
            return False  # a usage stub (ctxcli.core.usage) holds no content
        # The compaction summary is flagged visible-in-transcript-only, yet it is the
        # first message the client sends after the boundary.
        hidden = record.get("isVisibleInTranscriptOnly") and not record.get("isCompactSummary")
        return not (
            hidden or record.get("isApiErrorMessage") or message.get("model") == SYNTHETIC_MODEL
        )


def _result_ids(record: dict[str, Any]) -> list[str]:
    return _ids(record, "user", "tool_result", "tool_use_id")


def _use_ids(record: dict[str, Any]) -> list[str]:
    return _ids(record, "assistant", "tool_use", "id")


def _ids(record: dict[str, Any], role: str, kind: str, field: str) -> list[str]:
    if record.get("type") != role:
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [str(b[field]) for b in iter_dicts(content) if b.get("type") == kind and field in b]
