"""Agent sessions on this machine: find, list, diagnose, repair and reduce them in place.

Claude Code and Codex keep one JSONL file per session; this package finds them
(:mod:`.discover`), lists them with their size, tokens and health (:mod:`.listing`),
diagnoses and repairs what breaks a resume (:mod:`.doctor`), undoes a client's
compaction (:mod:`.uncompact`) and changes a session where the client reads it
(:func:`ctxcli.api.reduce` in place, :func:`fix_in_place`),
each change recorded so that one restore undoes them all (:mod:`ctxcli.store.history`)::

    from ctxcli.api import Destination, reduce
    from ctxcli.sessions import resolve_session

    session = resolve_session(last=True)
    config = load_config(preset="claude-code-resume")
    done = reduce(session.path, Destination(in_place=True, stream=True), config=config)
"""

from __future__ import annotations

from ctxcli.cost.prices import load_price_table, resume_cost
from ctxcli.formats.diagnose import Problem
from ctxcli.sessions.discover import (
    SessionFile,
    find_sessions,
    parse_since,
    resolve_session,
)
from ctxcli.sessions.doctor import Repair, diagnose, fix_in_place, plan_fixes
from ctxcli.sessions.listing import SessionQuery, SessionRow, list_sessions, scan_session
from ctxcli.sessions.uncompact import UncompactResult, plan_uncompact, uncompact

__all__ = [
    "Problem",
    "Repair",
    "SessionFile",
    "SessionQuery",
    "SessionRow",
    "UncompactResult",
    "diagnose",
    "find_sessions",
    "fix_in_place",
    "list_sessions",
    "load_price_table",
    "parse_since",
    "plan_fixes",
    "plan_uncompact",
    "resolve_session",
    "resume_cost",
    "scan_session",
    "uncompact",
]
