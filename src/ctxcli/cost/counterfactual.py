"""The requests with ctx in the loop: what a live reducer, or a resumed reduced file, sends.

Both build a :class:`~ctxcli.cost.sequence.RequestSequence` from the recorded one, to
be priced by the same cache model with the same calibration (:func:`ctxcli.cost.replay.
price_requests`):

- :func:`live_requests`: ``ctx proxy`` / ``ctx wrap`` / :class:`~ctxcli.agent.reducer.
  Reducer` with a chain. Each recorded request's messages go, in order, through the
  reducer of their conversation (one per conversation, recognised as the proxy does:
  the client's hidden prompt and the first message), with the request's timestamp;
  the reducer keeps its decisions per prefix and its prefix policy holds back a change
  to the sent messages that does not pay, exactly as live. What it returns is what is
  priced, with the client's breakpoints put back where the client put them.
- :func:`resumed_requests`: ``ctx reduce --in-place`` at a pause, then a resume. From
  request ``at`` on, the conversation at that point is sent reduced once (the resumed
  client's first, cache-cold request), and what the client appends after it follows
  unreduced.

The removed texts go to a directory under ctx's cache directory named after the
session and the chain (so hints have the same length from run to run), removed after.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ctxcli.agent.prefix_policy import PrefixPolicy
from ctxcli.agent.reducer import LIVE_PRESET, Api, Reducer
from ctxcli.cost._claude_code import message_blocks
from ctxcli.cost._codex import item_blocks
from ctxcli.cost.blocks import BlockMemo
from ctxcli.cost.sequence import Block, Request, RequestSequence
from ctxcli.pipeline.config import Config, build_config
from ctxcli.pipeline.live_loop import record_digest
from ctxcli.services.dirs import cache_dir, private_dir
from ctxcli.services.lock import path_lock

__all__ = [
    "LIVE_PRESET",
    "Chain",
    "LiveOptions",
    "LiveRun",
    "default_resume_at",
    "live_requests",
    "resumed_requests",
]

RESUME_PRESETS = {"claude_code": "claude-code-resume", "codex": "codex-resume"}
"""The chain meant to reduce a session file before it is resumed, per format."""

_API: dict[str, Api] = {"claude_code": "anthropic", "codex": "openai_responses"}
_READ_TOOL = {"claude_code": "Read"}


@dataclass(frozen=True)
class Chain:
    """A stage chain to price, and the name the tables show for it."""

    name: str
    config: Config

    @classmethod
    def preset(cls, name: str) -> Chain:
        """A shipped preset (raises ConfigError for an unknown name)."""
        return cls(name, build_config({"preset": name}, f"preset {name}"))

    @classmethod
    def default(cls) -> Chain:
        """Return ctx's live default chain."""
        return cls.preset(LIVE_PRESET)


@dataclass(frozen=True)
class LiveOptions:
    """How the live counterfactual runs.

    Attributes:
        prefix_policy: the reducer's (see :class:`~ctxcli.agent.reducer.Reducer`):
            ``"auto"`` holds back changes to the sent prefix that do not pay, None
            makes every change the chain proposes at once.
        marked: the client's requests also carry a breakpoint on the message the
            reducer names (``ReducerResult.cache_breakpoint``), and its ``"auto"``
            policy counts on it (``PrefixPolicy.marked``).
        offload_dir: where removed texts go (default: a directory under ctx's cache
            directory, removed afterwards).
    """

    prefix_policy: PrefixPolicy | Literal["auto"] | None = "auto"
    marked: bool = False
    offload_dir: Path | None = None

    def policy_for(self, api: str) -> PrefixPolicy | Literal["auto"] | None:
        """The reducer's prefix policy for ``api``."""
        if self.prefix_policy == "auto" and self.marked:
            return replace(PrefixPolicy.for_api(api), marked=True)
        return self.prefix_policy


@dataclass(frozen=True)
class LiveRun:
    """The requests a chain would have sent, and what the reducer did for each.

    Attributes:
        sequence: the requests, priced like the recorded ones.
        changed: the request changed messages sent before (its cached prefix).
        held_back: the chain proposed such a change and the prefix policy held it back.
    """

    sequence: RequestSequence
    changed: tuple[bool, ...]
    held_back: tuple[bool, ...]


def live_requests(
    sequence: RequestSequence, chain: Chain, options: LiveOptions | None = None
) -> LiveRun:
    """The recorded requests as a live reducer running ``chain`` would have sent them."""
    options = options or LiveOptions()
    sizes = exact_blocks(sequence)
    memo: BlockMemo = {}
    out: list[Request] = []
    changed: list[bool] = []
    held: list[bool] = []
    with _offload_root(sequence, chain, options.offload_dir) as root:
        reducers: dict[bytes, Reducer] = {}
        for request in sequence.requests:
            if not request.messages:  # built without its conversation: nothing to reduce
                out.append(request)
                changed.append(False)
                held.append(False)
                continue
            key = _conversation(request)
            reducer = reducers.get(key)
            if reducer is None:
                policy = options.policy_for(_API[sequence.format])
                reducer = reducers[key] = _reducer(sequence, chain, root, policy)
            result = reducer.reduce(list(request.messages), at=request.at)
            mark = result.cache_breakpoint if options.marked else None
            out.append(with_messages(sequence, request, result.messages, sizes, memo, mark))
            changed.append(result.changed_prefix_at is not None)
            held.append(result.held_back)
    return LiveRun(replace(sequence, requests=tuple(out)), tuple(changed), tuple(held))


def resumed_requests(
    sequence: RequestSequence, chain: Chain, at: int, offload_dir: Path | None = None
) -> RequestSequence:
    """Rebuild the requests as if the file had been reduced and resumed at ``at``.

    The requests if the file had been reduced with ``chain`` before request ``at``
    and the client resumed it: that request sends the reduced conversation, the later
    requests of its conversation what the client appended after it.
    """
    if not 0 <= at < len(sequence.requests):
        return sequence
    start = sequence.requests[at]
    sizes = exact_blocks(sequence)
    memo: BlockMemo = {}
    with _offload_root(sequence, chain, offload_dir) as root:
        reducer = _reducer(sequence, chain, root, None)
        result = reducer.reduce(list(start.messages), at=start.at)
    key = _conversation(start)
    out = list(sequence.requests[:at])
    for request in sequence.requests[at:]:
        if _conversation(request) != key:
            out.append(request)
            continue
        shared = _common_prefix(start.messages, request.messages)
        kept = []
        for message, source in zip(result.messages, result.sources, strict=True):
            if source is not None and source >= shared:
                break
            kept.append(message)
        messages = [*kept, *request.messages[shared:]]
        rebuilt = with_messages(sequence, request, messages, sizes, memo)
        if request is start:
            # A new client process resumes the file: it sent nothing after the turn.
            rebuilt = replace(rebuilt, post_turn_at=None)
        out.append(rebuilt)
    return replace(sequence, requests=tuple(out))


def default_resume_at(sequence: RequestSequence) -> int | None:
    """Find where a user would have reduced and resumed.

    Where a user would have reduced and resumed: the request after the longest pause
    (None for a session of fewer than two timed requests).
    """
    best: tuple[float, int] | None = None
    requests = sequence.requests
    for n in range(1, len(requests)):
        before, after = requests[n - 1].at, requests[n].at
        if before is None or after is None:
            continue
        if best is None or after - before > best[0]:
            best = (after - before, n)
    return best[1] if best is not None else None


def _reducer(
    sequence: RequestSequence,
    chain: Chain,
    root: Path,
    policy: PrefixPolicy | Literal["auto"] | None,
) -> Reducer:
    return Reducer(
        chain.config,
        offload_dir=root,
        api=_API[sequence.format],
        read_tool=_READ_TOOL.get(sequence.format),
        prefix_policy=policy,
    )


def with_messages(
    sequence: RequestSequence,
    request: Request,
    messages: Sequence[Any],
    sizes: dict[bytes, Block],
    memo: BlockMemo,
    mark: int | None = None,
) -> Request:
    """Rewrite ``request`` to send ``messages`` with the client's breakpoints.

    ``request`` sending ``messages`` instead, with the client's breakpoints (and one
    on the last block of message ``mark``).
    """
    if sequence.format == "codex":
        blocks = item_blocks(messages, sizes, memo)
        return replace(request, blocks=blocks, messages=tuple(messages))
    marks = request.breakpoints
    trailing = max(0, len(marks) - 1)
    ttl = marks[0][1] if marks else "5m"
    blocks, marks = message_blocks(request.blocks[0], messages, trailing, ttl, memo, mark)
    return replace(request, blocks=blocks, breakpoints=marks, messages=tuple(messages))


def exact_blocks(sequence: RequestSequence) -> dict[bytes, Block]:
    """Blocks of known size (Codex reasoning), by key: they keep it when sent again."""
    return {b.key: b for r in sequence.requests for b in r.blocks if b.tokens is not None}


def _conversation(request: Request) -> bytes:
    """Key a conversation as the proxy does.

    What identifies a conversation, as the proxy keys it: the client's hidden prompt
    (per agent) and the first message.
    """
    first = request.messages[0] if request.messages else None
    return record_digest(request.blocks[0].key if request.blocks else b"", first)


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y and x != y:
            break
        n += 1
    return n


@contextmanager
def _offload_root(sequence: RequestSequence, chain: Chain, given: Path | None) -> Iterator[Path]:
    if given is not None:
        yield given
        return
    name = hashlib.blake2b(f"{sequence.name}\0{chain.name}".encode(), digest_size=8).hexdigest()
    root = private_dir(cache_dir() / "cost") / name
    # The path is fixed (hints cite it, so its tokens are part of the price): two
    # replays of one session and chain at once take turns instead of emptying it
    # under each other.
    with path_lock(root):
        shutil.rmtree(root, ignore_errors=True)
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)
