"""How well the cache model reproduces the recorded bills of the shared sessions.

For each Claude Code session and Codex rollout in ``../shared/transcripts`` (or the
files given): the recorded bill (each API response once), the replay of the session as
it ran through the prompt-cache model, their relative error, the share of each bill
paid for cache reads, the busts (requests whose cached prefix collapsed) recorded and
replayed, and the two constants fitted per session (hidden prompt tokens, provider
tokens per token of ours).

    .venv/bin/python benchmarks/bench_cost.py [FILE ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ctxcli.cost.recorded import RecordedCost
from ctxcli.cost.replay import replay_session

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "transcripts"


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


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(
        p for p in SHARED.glob("*.jsonl") if p.name.startswith(("cc_", "codex_"))
    )
    if not paths:
        print(f"no sessions: {SHARED} is absent", file=sys.stderr)
        return 1
    head = (
        f"{'session':44} {'calls':>5} {'recorded $':>10} {'replayed $':>10} {'error':>7}  "
        f"{'reads rec':>9} {'reads rep':>9} {'rel':>7} {'points':>6}  {'busts':>5}  "
        f"{'hidden tok':>10} {'ratio':>5} {'secs':>4}"
    )
    print(head)
    print("-" * len(head))
    for path in paths:
        start = time.perf_counter()
        s = replay_session(path)
        c = s.replay.calibration
        points = 100 * (s.replayed_read_share - s.recorded_read_share)
        busts = f"{recorded_busts(s.recorded)}/{s.replay.busts}"
        print(
            f"{path.name[:44]:44} {len(s.recorded.requests):5} {s.recorded_usd:10.3f} "
            f"{s.replayed_usd:10.3f} {s.error:+7.1%}  {s.recorded_read_share:9.1%} "
            f"{s.replayed_read_share:9.1%} {s.read_share_error:+7.1%} {points:+6.1f}  "
            f"{busts:>5}  {c.overhead_tokens:10,} {c.token_ratio:5.3f} "
            f"{time.perf_counter() - start:4.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
