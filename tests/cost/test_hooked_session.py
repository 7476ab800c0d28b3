"""``ctx cost`` of a session the hook wrote prices what was sent: the hook's previews."""

from __future__ import annotations

from pathlib import Path

from ctxcli import api
from ctxcli.cost.session import SessionCost, session_cost
from support.hooked_sessions import LONG, hooked_session


def test_cost_prices_the_previews_the_hook_sent(tmp_path: Path) -> None:
    hooked = hooked_session(tmp_path, hooks=True)
    direct = hooked_session(tmp_path, hooks=False)
    with_hook, without = session_cost(hooked), session_cost(direct)
    # The bill the file records is the responses' usage: the same in both files here.
    assert with_hook.recorded_usd == without.recorded_usd > 0
    # Rebuilt from the file, the requests carry the previews the model got, not the outputs.
    sent = _texts(with_hook)
    assert "[ctx: output truncated" in sent
    assert all(out.rstrip("\n") not in sent for out in LONG.values())
    assert all(out.rstrip("\n") in _texts(without) for out in LONG.values())
    # The session brought back to the tools' outputs prices as the one without the hook.
    original = tmp_path / "original.jsonl"
    original.write_bytes(api.restore(hooked).data)
    assert original.read_bytes() == direct.read_bytes()
    assert _texts(session_cost(original)) == _texts(without)


def _texts(cost: SessionCost) -> str:
    """Every block of the last request rebuilt from the file."""
    return "\n".join(b.text for b in cost.session.sequence.requests[-1].blocks)
