"""Agent sessions on this machine: find, list, diagnose, repair and reduce them in place.

Claude Code and Codex keep one JSONL file per session; this package finds them
(:mod:`.discover`), lists them with their size, tokens and health (:mod:`.listing`),
diagnoses and repairs what breaks a resume (:mod:`.doctor`) and changes a session
where the client reads it, recording every change so one restore undoes them all
(:mod:`.inplace`)::

    from ctxcli.sessions import list_sessions, resolve_session, reduce_in_place

    session = resolve_session(last=True)
    change = reduce_in_place(session.path, config=load_config(preset="claude-code-resume"))
"""

from __future__ import annotations

from ctxcli.cost.prices import load_price_table, resume_cost
from ctxcli.sessions.discover import (
    SessionFile,
    find_sessions,
    parse_since,
    resolve_session,
)
from ctxcli.sessions.doctor import Problem, Repair, diagnose, plan_fixes
from ctxcli.sessions.inplace import (
    Change,
    LiveSessionError,
    Restored,
    data_home,
    fix_in_place,
    has_layers,
    liveness,
    reduce_in_place,
    restore_session,
    state_dir,
    update_index,
)
from ctxcli.sessions.listing import SessionQuery, SessionRow, list_sessions, scan_session

__all__ = [
    "Change",
    "LiveSessionError",
    "Problem",
    "Repair",
    "Restored",
    "SessionFile",
    "SessionQuery",
    "SessionRow",
    "data_home",
    "diagnose",
    "find_sessions",
    "fix_in_place",
    "has_layers",
    "list_sessions",
    "liveness",
    "load_price_table",
    "parse_since",
    "plan_fixes",
    "reduce_in_place",
    "resolve_session",
    "restore_session",
    "resume_cost",
    "scan_session",
    "state_dir",
    "update_index",
]
