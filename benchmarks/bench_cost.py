"""The bill of the shared sessions: recorded, replayed, and with ctx in the loop.

For each Claude Code session and Codex rollout in ``../shared/transcripts`` (or the
files given), three tables:

1. How well the cache model reproduces the recorded bill: the recorded bill (each API
   response once), the replay of the session as it ran, their relative error, the
   share of each bill paid for cache reads, the busts (requests whose cached prefix
   collapsed) recorded and replayed, and the two constants fitted per session.
2. ctx's default live chain (the ``live`` preset with the reducer's prefix policy):
   as ``ctx proxy`` sends today (the client's own breakpoints), and with the reducer's
   suggested breakpoint placed too (``ReducerResult.cache_breakpoint``); then reduce in
   place at the longest pause and resume; and what share of the replayed input is tool
   output and tool-call arguments at all (what any chain could remove).
3. Every shipped preset live, as ``ctx proxy --preset NAME`` would run it.
4. The meter held out: the replay with the documented cache rules (unfitted) beside the
   replay with the cache constants (TTL grace, a warm client prompt) chosen on the other
   half of the sessions (fitted), and the per-request errors.
5. The peers on the same sessions (``ctx cost --compare``): ctx's default and each
   alternative priced from the records, each with its band (the replay's error on the
   part it changes).

    .venv/bin/python benchmarks/bench_cost.py [FILE ...]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ctxcli.cost._claude_code import sent_messages
from ctxcli.cost.alternatives import ALTERNATIVES
from ctxcli.cost.cache import CachePolicy
from ctxcli.cost.counterfactual import Chain, LiveOptions
from ctxcli.cost.recorded import RecordedCost
from ctxcli.cost.replay import SessionReplay, replay_session
from ctxcli.cost.session import CostOptions, SessionCost, session_cost
from ctxcli.pipeline.presets import preset_names
from ctxcli.services.tokens.by_name import get_counter

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "transcripts"
TOOL_KINDS = {"tool_result", "tool_use", "function_call", "function_call_output",
              "custom_tool_call", "custom_tool_call_output"}  # fmt: skip


def recorded_busts(recorded: RecordedCost) -> int:
    """Busts by the cache model's own rule, read off the recorded usage."""
    busts = 0
    previous = 0
    for request in recorded.requests:
        u = request.usage
        if previous - u.cache_read >= 2048 and u.cache_read < previous / 2:
            busts += 1
        previous = u.cache_read + u.cache_write if u.cache_write else u.input_total
    return busts


@dataclass
class Session:
    """One session priced by ``ctx cost``'s own route (:func:`session_cost`): the default
    chain live (the client's breakpoints) with reduce + resume, and with the proxy's
    breakpoint placed too."""

    path: Path
    cost: SessionCost
    marked: SessionCost
    seconds: float

    @classmethod
    def price(cls, path: Path) -> Session:
        start = time.perf_counter()
        cost = session_cost(path, CostOptions(resume="auto"))
        marked = session_cost(path, CostOptions(resume=None, live=LiveOptions(marked=True)))
        return cls(path, cost, marked, time.perf_counter() - start)

    @property
    def replay(self) -> SessionReplay:
        return self.cost.session


def tool_share(s: SessionReplay) -> float:
    """Share of the replayed input tokens that are tool results and tool-call arguments."""
    fmt = s.sequence.format
    counter = get_counter("o200k" if fmt == "codex" else "cl100k")
    c = s.replay.calibration
    tool = total = 0
    for request in s.sequence.requests:
        kinds = _kinds(request.messages, fmt)
        sized = [b for b in request.blocks if not b.hidden]
        total += c.overhead_tokens
        for block, kind in zip(sized, kinds, strict=False):
            n = block.tokens if block.tokens is not None else counter.count(block.text)
            n = round(n * (1 if block.tokens is not None else c.token_ratio))
            total += n
            tool += n if kind in TOOL_KINDS else 0
    return tool / total if total else 0.0


def _kinds(messages: Sequence[object], fmt: str) -> list[str]:
    out: list[str] = []
    if fmt != "codex":  # the blocks are of the messages as the API reads them
        messages = sent_messages([m for m in messages if isinstance(m, dict)])
    for m in messages:
        if not isinstance(m, dict):
            continue
        if fmt == "codex":
            if m.get("type") != "reasoning":
                out.append(str(m.get("type", "message")))
            else:
                out.append("reasoning")
            continue
        content = m.get("content")
        items = [content] if isinstance(content, str) else content or []
        out += [i.get("type", "text") if isinstance(i, dict) else "text" for i in items]
    return out


def accuracy_table(sessions: list[Session]) -> None:
    head = (
        f"{'session':44} {'calls':>5} {'recorded $':>10} {'replayed $':>10} {'error':>7}  "
        f"{'reads rec':>9} {'reads rep':>9} {'rel':>7} {'points':>6}  {'busts':>5}  "
        f"{'hidden tok':>10} {'ratio':>5}"
    )
    print(head)
    print("-" * len(head))
    for one in sessions:
        s = one.replay
        c = s.replay.calibration
        points = 100 * (s.replayed_read_share - s.recorded_read_share)
        busts = f"{recorded_busts(s.recorded)}/{s.replay.busts}"
        print(
            f"{one.path.name[:44]:44} {len(s.recorded.requests):5} {s.recorded_usd:10.3f} "
            f"{s.replayed_usd:10.3f} {s.error:+7.1%}  {s.recorded_read_share:9.1%} "
            f"{s.replayed_read_share:9.1%} {s.read_share_error:+7.1%} {points:+6.1f}  "
            f"{busts:>5}  {c.overhead_tokens:10,} {c.token_ratio:5.3f}"
        )


def default_table(sessions: list[Session]) -> None:
    head = (
        f"{'session':44} {'recorded $':>10} {'replayed $':>10} {'live $':>8} {'vs rep':>7} "
        f"{'busts':>5} {'held':>5}  {'+mark $':>8} {'vs rep':>7}  {'resume $':>8} "
        f"{'vs rep':>7}  {'tool tok':>8} {'secs':>4}"
    )
    print(head)
    print("-" * len(head))
    totals = [0.0] * 5
    for one in sessions:
        s = one.replay
        live, marked = one.cost.chains[0], one.marked.chains[0]
        held = sum(live.held_back)
        rep = s.replayed_usd
        # A session with no pause to resume after is priced as replayed.
        resume = one.cost.resume.usd if one.cost.resume is not None else rep
        for i, v in enumerate((s.recorded_usd, rep, live.usd, marked.usd, resume)):
            totals[i] += v
        print(
            f"{one.path.name[:44]:44} {s.recorded_usd:10.3f} {rep:10.3f} {live.usd:8.3f} "
            f"{_delta(live.usd, rep):>7} {live.busts:5} {held:5}  {marked.usd:8.3f} "
            f"{_delta(marked.usd, rep):>7}  {resume:8.3f} {_delta(resume, rep):>7}  "
            f"{tool_share(s):8.1%} {one.seconds:4.0f}"
        )
    rec, rep, live_t, marked_t, resume_t = totals
    print(
        f"{'all together':44} {rec:10.3f} {rep:10.3f} {live_t:8.3f} {_delta(live_t, rep):>7} "
        f"{'':5} {'':5}  {marked_t:8.3f} {_delta(marked_t, rep):>7}  {resume_t:8.3f} "
        f"{_delta(resume_t, rep):>7}"
    )


def preset_table(sessions: list[Session]) -> None:
    names = preset_names()
    head = f"{'preset (live, vs replayed)':28} " + " ".join(
        f"{s.path.name[:12]:>12}" for s in sessions
    )
    print(head + f" {'all':>7}")
    print("-" * (len(head) + 8))
    chains = tuple(Chain.preset(name) for name in names)
    costs = [session_cost(one.path, CostOptions(chains=chains, resume=None)) for one in sessions]
    for k, name in enumerate(names):
        row = []
        rep = live = 0.0
        for cost in costs:
            bill = cost.chains[k]
            row.append(f"{_delta(bill.usd, cost.replayed_usd):>12}")
            rep += cost.replayed_usd
            live += bill.usd
        print(f"{name:28} " + " ".join(row) + f" {_delta(live, rep):>7}", flush=True)


GRID = tuple((grace, warm) for grace in (0.0, 30.0, 60.0, 120.0) for warm in (False, True))
"""The cache constants the hold-out chooses from: a TTL grace (seconds) and whether the
client prompt is warm when the session starts. (0.0, False) is the documented model."""


def _replay_error(path: Path, grace: float, warm: bool) -> float:
    base = CachePolicy.openai() if path.name.startswith("codex") else CachePolicy.anthropic()
    policy = replace(base, ttl_grace_seconds=grace)
    return replay_session(path, policy=policy, warm_client_prompt=warm).error


def holdout_table(sessions: list[Session]) -> None:
    """Constants chosen on one half (even / odd positions), reported on the other."""
    paths = [one.path for one in sessions]
    errors = {p: {g: _replay_error(p, *g) for g in GRID} for p in paths}
    head = (
        f"{'session (held out)':44} {'unfitted':>8} {'fitted':>8}  {'grace s':>7} {'warm':>5}  "
        f"{'within 5%':>9} {'usd err median':>14} {'p90':>6}"
    )
    print(head)
    print("-" * len(head))
    halves = (paths[0::2], paths[1::2])
    for fit, held in (halves, halves[::-1]):
        best = min(GRID, key=lambda g: sum(abs(errors[p][g]) for p in fit))
        for p in held:
            one = next(s for s in sessions if s.path == p)
            a = one.cost.anchoring
            usd = a.distribution("usd")
            print(
                f"{p.name[:44]:44} {errors[p][GRID[0]]:+8.1%} {errors[p][best]:+8.1%}  "
                f"{best[0]:7.0f} {best[1]!s:>5}  {a.within:>4}/{len(a.checks):<4} "
                f"{usd['median']:14.1%} {usd['p90']:6.1%}"
            )


def alternatives_table(sessions: list[Session]) -> None:
    """ctx's default and the peers, priced from the records, vs the recorded bill."""
    costs = [
        session_cost(one.path, CostOptions(resume=None, alternatives=ALTERNATIVES))
        for one in sessions
    ]
    names = ["ctx default (live)", *ALTERNATIVES]
    head = f"{'vs recorded, ± band':28} " + " ".join(f"{s.path.name[:14]:>16}" for s in sessions)
    print(head + f" {'all':>8}")
    print("-" * (len(head) + 9))
    for k, name in enumerate(names):
        row = []
        recorded = total = 0.0
        for cost in costs:
            bill = cost.chains[0] if k == 0 else cost.alternatives[k - 1]
            rec = cost.recorded_usd
            band = bill.band / rec if rec else 0.0
            row.append(f"{_delta(bill.anchored_usd, rec):>9}±{band:5.1%}")
            recorded += rec
            total += bill.anchored_usd
        print(f"{name:28} " + " ".join(row) + f" {_delta(total, recorded):>8}", flush=True)


def _delta(value: float, base: float) -> str:
    return f"{value / base - 1:+.1%}" if base else "-"


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(
        p for p in SHARED.glob("*.jsonl") if p.name.startswith(("cc_", "codex_"))
    )
    if not paths:
        print(f"no sessions: {SHARED} is absent", file=sys.stderr)
        return 1
    sessions = [Session.price(p) for p in paths]
    print("The cache model against the recorded bills\n")
    accuracy_table(sessions)
    print("\nctx's default live chain (preset live, prefix policy on)\n")
    default_table(sessions)
    print("\nEvery preset live, as ctx proxy --preset NAME runs it\n")
    preset_table(sessions)
    print("\nThe meter held out: documented cache rules vs constants fitted on the other half\n")
    holdout_table(sessions)
    print("\nThe peers on the same sessions, priced from the records\n")
    alternatives_table(sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
