"""Request sizes the real Claude Code and Codex CLIs send when they resume a session.

Called by ``make bench`` when scripts/install_clients.sh has installed the clients
(else it says why and measures nothing): every Claude Code and Codex session in
../shared/transcripts is resumed with the real client against the loopback fake APIs of
tests/e2e, original and reduced (claude-code-resume / codex-resume), and the request the
client sent is measured: body bytes, conversation bytes and conversation tokens (cl100k,
the text ``ctx stats`` counts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

E2E = Path(__file__).resolve().parent.parent / "tests" / "e2e"
sys.path.insert(0, str(E2E))
sys.path.insert(0, str(E2E.parent))  # support.fake_api, which the harness uses

from harness import SHARED, client, measure, reduce, resume_claude, resume_codex  # noqa: E402

# Sessions a client cannot resume as they are: repaired by ctx doctor --fix first
# (a malformed line; see tests/e2e/test_e2e_claude_code.py).
REPAIR = {"cc_mclaude_c76e5be5.jsonl"}


@dataclass
class ResumeRow:
    session: str
    client: str
    body_before: int
    body_after: int
    tokens_before: int
    tokens_after: int
    predicted: float
    ok: bool


def measure_resumes() -> list[ResumeRow]:
    """One row per session the installed clients can resume (empty when none is)."""
    rows: list[ResumeRow] = []
    jobs = [
        ("claude", "cc_", "claude-code-resume", "/v1/messages", resume_claude),
        ("codex", "codex_", "codex-resume", "/v1/responses", resume_codex),
    ]
    for name, prefix, preset, path, resume in jobs:
        exe, why = client(name)
        if exe is None:
            print(f"resume requests ({name}): not measured: {why}", file=sys.stderr)
            continue
        for session in sorted(SHARED.glob(f"{prefix}*.jsonl")):
            if "_subagent_" in session.name:
                continue
            with tempfile.TemporaryDirectory(prefix="ctx-bench-resume-") as tmp:
                work = Path(tmp)
                if session.name in REPAIR:
                    session = _repaired(session, work)
                reduced = work / "reduced" / session.name
                reduced.parent.mkdir()
                stats = reduce(session, preset, reduced)
                try:
                    before = resume(work / "orig", session).accepted_turn(path, "original")
                    after = resume(work / "red", reduced).accepted_turn(path, "reduced")
                except AssertionError as exc:
                    print(f"{session.name}: {str(exc).splitlines()[0]}", file=sys.stderr)
                    continue
                b, a = measure(before), measure(after)
                tb, ta = stats["tokens_before"], stats["tokens_after"]
                if stats.get("resume_tokens_before"):
                    tb, ta = stats["resume_tokens_before"], stats["resume_tokens_after"]
                rows.append(
                    ResumeRow(
                        session.name,
                        name,
                        b.body_bytes,
                        a.body_bytes,
                        b.conversation_tokens,
                        a.conversation_tokens,
                        1 - ta / tb if tb else 0.0,
                        True,
                    )
                )
    return rows


def _repaired(session: Path, work: Path) -> Path:
    """A copy of ``session`` after ``ctx doctor --fix`` (its originals under ``work``)."""
    fixed = work / "fixed" / session.name
    fixed.parent.mkdir()
    fixed.write_bytes(session.read_bytes())
    env = {**os.environ, "CTX_DATA_DIR": str(work / "data"), "CTX_NO_PLUGINS": "1"}
    cmd = [sys.executable, "-m", "ctxcli", "doctor", str(fixed), "--fix", "--force"]
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return fixed


def print_resumes(rows: list[ResumeRow]) -> None:
    if not rows:
        return
    print(
        "\nrequest a real client sends on resume (original -> reduced; tokens: conversation, cl100k)"
    )
    print(f"{'session':50} {'client':6} {'bytes':>21} {'tokens':>17} {'saved':>6} {'predicted':>9}")
    for r in rows:
        saved = 1 - r.tokens_after / r.tokens_before if r.tokens_before else 0.0
        print(
            f"{r.session:50} {r.client:6} {r.body_before:>9,} -> {r.body_after:>8,} "
            f"{r.tokens_before:>7,} -> {r.tokens_after:>6,} {saved:>6.1%} {r.predicted:>9.1%}"
        )


if __name__ == "__main__":
    print_resumes(measure_resumes())
