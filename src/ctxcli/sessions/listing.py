"""One row per session: size, tokens, health, title and what a resume costs.

Reading a session costs a parse, a doctor pass, a dry-run reduction (to know the
tokens a resume sends before and after) and a pass over its recorded usage (what the
session cost). The figures are cached per file, keyed by path, size and modification
time (and the counting mode), in ``<cache dir>/sessions-v2.json``: a second listing of
an unchanged machine reads no session file at all. The recorded usage is cached by
model, in tokens, and priced when listed: another price table needs no new read.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxcli import api
from ctxcli._version import __version__
from ctxcli.core.errors import CtxError, OnInvalid
from ctxcli.cost.prices import PriceTable, TokenUsage, load_price_table, resume_cost
from ctxcli.cost.recorded import recorded_cost
from ctxcli.formats.clients import ClientFile, read_client_file
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.presets import preset_names
from ctxcli.services.dirs import cache_dir
from ctxcli.services.tokens.count_cache import cache_disabled
from ctxcli.services.tokens.ledger import CountOptions
from ctxcli.sessions.discover import (
    CLAUDE,
    CODEX,
    SessionFile,
    find_sessions,
    match_project,
    project_path,
    session_project,
    short_ids,
)
from ctxcli.sessions.doctor import DEFAULT_MAX_LINE_BYTES, diagnose_file

__all__ = [
    "CACHE_NAME",
    "ScanCache",
    "SessionQuery",
    "SessionRow",
    "default_project",
    "list_sessions",
    "preset_for",
    "recorded_usage",
    "recorded_usd",
    "relative_time",
    "scan_metadata",
    "scan_session",
]

CACHE_NAME = "sessions-v2.json"
_SKIP_PROMPT = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<command-")


@dataclass
class SessionRow:
    """Everything ``ctx sessions`` shows about one session."""

    id: str
    short_id: str
    agent: str
    path: str
    project: str | None
    parent: str | None
    archived: bool
    modified: float
    bytes: int
    records: int
    largest_line_bytes: int
    largest_line: int | None
    tokens: int | None
    resume_tokens_before: int | None
    resume_tokens_after: int | None
    health: list[str]
    title: str | None
    first_prompt: str | None
    summary: str | None
    git_branch: str | None
    model: str | None
    created: str | None
    preset: str | None
    cost_before: float | None = None
    cost_after: float | None = None
    recorded_usd: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``ctx sessions --json``."""
        return asdict(self)


def preset_for(agent: str) -> str | None:
    """The shipped chain a resume of ``agent`` is measured with (None: the default)."""
    wanted = {CLAUDE: "claude-code-resume", CODEX: "codex-resume"}.get(agent)
    return wanted if wanted in preset_names() else None


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in ("text", "input_text"):
                text = block.get("text")
                if isinstance(text, str):
                    return text
    return None


def _one_line(text: str | None, width: int = 120) -> str | None:
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def scan_metadata(file: ClientFile) -> dict[str, Any]:
    """Records, the largest line, first prompt, summary, branch, model, creation time."""
    meta: dict[str, Any] = {
        "records": 0,
        "largest_line_bytes": 0,
        "largest_line": None,
        "first_prompt": None,
        "summary": None,
        "git_branch": None,
        "model": None,
        "created": None,
    }
    for rec in file.records:
        if rec.data is None and rec.invalid is None:
            continue  # a blank line
        meta["records"] += 1
        size = len(rec.body)
        if size > meta["largest_line_bytes"]:
            meta["largest_line_bytes"], meta["largest_line"] = size, rec.line
        if isinstance(rec.data, dict):
            _note(meta, rec.data)
    return meta


def _note(meta: dict[str, Any], data: dict[str, Any]) -> None:
    rtype = data.get("type")
    if meta["created"] is None and isinstance(data.get("timestamp"), str):
        meta["created"] = data["timestamp"]
    if rtype == "summary" and isinstance(data.get("summary"), str):
        meta["summary"] = data["summary"]
    if not meta["git_branch"] and isinstance(data.get("gitBranch"), str):
        meta["git_branch"] = data["gitBranch"] or None
    message = data.get("message")
    if rtype == "user" and isinstance(message, dict) and meta["first_prompt"] is None:
        if not data.get("isMeta") and not data.get("isCompactSummary"):
            text = _text_of(message.get("content"))
            if text and not text.lstrip().startswith(_SKIP_PROMPT):
                meta["first_prompt"] = _one_line(text)
    if rtype == "assistant" and isinstance(message, dict):
        model = message.get("model")
        if isinstance(model, str) and not model.startswith("<"):
            meta["model"] = model
    payload = data.get("payload")
    if not isinstance(payload, dict):
        return
    if rtype == "session_meta":
        git = payload.get("git")
        if isinstance(git, dict) and isinstance(git.get("branch"), str):
            meta["git_branch"] = git["branch"]
        if isinstance(payload.get("timestamp"), str):
            meta["created"] = payload["timestamp"]
    elif rtype == "turn_context" and isinstance(payload.get("model"), str):
        meta["model"] = payload["model"]
    elif (
        rtype == "response_item"
        and payload.get("type") == "message"
        and payload.get("role") == "user"
        and meta["first_prompt"] is None
    ):
        text = _text_of(payload.get("content"))
        if text and not text.lstrip().startswith(_SKIP_PROMPT):
            meta["first_prompt"] = _one_line(text)


def scan_session(
    session: SessionFile,
    *,
    exact: bool = False,
    config: Config | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> dict[str, Any]:
    """Read one session file: metadata, doctor's findings and resume token counts.

    Without ``exact`` tokens are estimated (characters / 4); with it they are
    counted with the configured tokenizer.
    """
    raw = api.read_input(str(session.path))
    file = read_client_file(raw, str(session.path))  # read once: metadata, bill, health
    meta = scan_metadata(file)
    meta["usage"] = recorded_usage(file)
    found = diagnose_file(file, max_line_bytes=max_line_bytes)
    meta["health"] = sorted({p.kind for p in found.problems})
    preset = preset_for(session.agent)
    meta["preset"] = preset
    cfg = config or load_config(preset=preset)
    if not exact:
        cfg = cfg.with_overrides(tokenizer="approx")
    meta.update(tokens=None, resume_tokens_before=None, resume_tokens_after=None, error=None)
    try:
        options = api.RunOptions(
            on_invalid=OnInvalid.KEEP, counting=CountOptions(cache=exact, workers=1)
        )
        report = api.stats(session.path, config=cfg, options=options, raw=raw)
    except CtxError as exc:
        meta["error"] = str(exc)
        return meta
    meta["tokens"] = report.tokens_before
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is None or after is None:
        before, after = report.tokens_before, report.tokens_after
    meta["resume_tokens_before"], meta["resume_tokens_after"] = before, after
    return meta


def recorded_usage(file: ClientFile) -> dict[str, list[int]]:
    """The tokens a session's API responses billed, summed by model (each response once).

    :func:`ctxcli.cost.recorded.recorded_cost` reads them; tokens, not dollars, so the
    cached figures hold for any price table. Each list is a :class:`TokenUsage`'s fields
    in order. A file that records no usage has none (an empty dict).
    """
    try:
        bill = recorded_cost(file, prices=PriceTable({}))
    except CtxError:
        return {}
    by_model: dict[str, TokenUsage] = {}
    for request in bill.requests:
        model = request.model or ""
        by_model[model] = by_model.get(model, TokenUsage()) + request.usage
    return {m: list(astuple(u)) for m, u in by_model.items()}


def recorded_usd(usage: dict[str, list[int]], prices: PriceTable) -> float | None:
    """Dollars of :func:`recorded_usage` at ``prices``; None when no model has a price."""
    priced = [
        (price, TokenUsage(*tokens))
        for model, tokens in usage.items()
        if (price := prices.lookup(model or None)) is not None
    ]
    return sum(price.usd(u) for price, u in priced) if priced else None


_Count = Annotated[int, Field(ge=0)]


class ScanEntry(BaseModel):
    """What :func:`scan_session` found in one file, as the cache keeps it.

    A cache entry is read back through this model: one of another shape (a field of the
    wrong type, written by hand or by another build) is dropped and the file read again,
    never carried into a row (where it failed every listing until the cache was deleted).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    records: _Count
    largest_line_bytes: _Count
    largest_line: _Count | None
    first_prompt: str | None
    summary: str | None
    git_branch: str | None
    model: str | None
    created: str | None
    usage: dict[str, list[_Count]]
    health: list[str]
    preset: str | None
    tokens: _Count | None
    resume_tokens_before: _Count | None
    resume_tokens_after: _Count | None
    error: str | None

    @field_validator("usage")
    @classmethod
    def _usage_fields(cls, usage: dict[str, list[int]]) -> dict[str, list[int]]:
        width = len(fields(TokenUsage))
        if any(len(tokens) != width for tokens in usage.values()):
            raise ValueError(f"each model's usage holds {width} token counts")
        return usage


class ScanCache:
    """The per-file scan results, keyed by path, size, mtime and counting mode."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir() / CACHE_NAME
        self.enabled = not cache_disabled()
        self.entries: dict[str, Any] = {}
        self.dirty = False
        if self.enabled:
            with contextlib.suppress(OSError, orjson.JSONDecodeError):
                data = orjson.loads(self.path.read_bytes())
                if isinstance(data, dict) and data.get("ctx_version") == __version__:
                    entries = data.get("entries")
                    self.entries = entries if isinstance(entries, dict) else {}

    @staticmethod
    def key(session: SessionFile, exact: bool, max_line_bytes: int) -> str:
        """Key a session's scan by what would change it (file, size, mtime, options)."""
        return f"{session.path}|{session.size}|{session.mtime_ns}|{int(exact)}|{max_line_bytes}"

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the scan kept under ``key``, or None when there is none or it is invalid."""
        value = self.entries.get(key)
        if value is None:
            return None
        try:
            return ScanEntry.model_validate(value).model_dump()
        except ValidationError:
            del self.entries[key]  # read the file again; the new entry replaces it
            self.dirty = True
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Keep ``value`` under ``key``; the cache is written back later."""
        self.entries[key] = value
        self.dirty = True

    def save(self, live: set[str]) -> None:
        """Write the cache, keeping only entries of files that still exist as listed."""
        if not self.enabled or not self.dirty:
            return
        kept = {k: v for k, v in self.entries.items() if k.rsplit("|", 4)[0] in live}
        payload = {"ctx_version": __version__, "entries": kept}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            api.write_atomic(self.path, orjson.dumps(payload), mode=0o600)
        except OSError:
            pass  # a cache that cannot be written only costs time on the next listing


@dataclass(frozen=True, kw_only=True)
class SessionQuery:
    """Which sessions :func:`list_sessions` lists, how it measures them and in what order.

    Attributes:
        agent: only this client's sessions (``claude``, ``codex``); None for all.
        project: only the sessions of this project directory.
        since: only the sessions modified at or after this time (seconds since the epoch).
        archived: list the sessions the client archived too.
        exact: count tokens with the configured tokenizer (default: characters / 4).
        sort: ``age`` (most recent first) or ``size`` (largest first).
        max_line_bytes: a line longer than this is a health problem (see ``ctx doctor``).

    Raises:
        CtxError: an unknown sort key.
    """

    agent: str | None = None
    project: str | None = None
    since: float | None = None
    archived: bool = False
    exact: bool = False
    sort: str = "age"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES

    def __post_init__(self) -> None:
        if self.sort not in ("age", "size"):
            raise CtxError(f"sort {self.sort!r} is invalid: use 'age' or 'size'.")


def list_sessions(
    query: SessionQuery | None = None,
    *,
    prices: PriceTable | None = None,
    cache: bool = True,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> list[SessionRow]:
    """The sessions on this machine, filtered and sorted, one :class:`SessionRow` each.

    ``query`` says which, how they are measured and in what order (default: all of
    them, most recent first); a subagent always follows its parent session. Sessions
    not in the cache are read by ``jobs`` processes; ``prices`` (default: the shipped
    table) prices what a resume costs.

    Raises:
        CtxError: an unknown agent.
    """
    query = query or SessionQuery()
    prices = prices if prices is not None else load_price_table()
    files = _matching(query)
    ids = short_ids(s.id.split("/")[-1] for s in files)
    store = ScanCache() if cache else None
    keys = [ScanCache.key(sf, query.exact, query.max_line_bytes) for sf in files]
    metas = {k: m for k in keys if store is not None and (m := store.get(k)) is not None}
    missing = [(k, sf) for k, sf in zip(keys, files, strict=True) if k not in metas]
    scan = partial(scan_session, exact=query.exact, max_line_bytes=query.max_line_bytes)
    metas.update(_scan_all(scan, missing, jobs, progress))
    if store is not None:
        for key, _sf in missing:
            store.put(key, metas[key])
    rows = [_row(sf, metas[key], ids, prices) for key, sf in zip(keys, files, strict=True)]
    if store is not None:
        store.save({str(f.path) for f in files})
    return _order(rows, query.sort)


def _matching(query: SessionQuery) -> list[SessionFile]:
    """The session files ``query`` selects."""
    files = find_sessions(agent=query.agent, archived=query.archived)
    if query.project is not None:
        where = match_project(query.project, files)
        files = [f for f in files if session_project(f) == where]
    if query.since is not None:
        files = [f for f in files if f.mtime >= query.since]
    return files


def _scan_all(
    scan: Callable[[SessionFile], dict[str, Any]],
    missing: list[tuple[str, SessionFile]],
    jobs: int,
    progress: Callable[[int, int], None] | None,
) -> dict[str, dict[str, Any]]:
    """Each session's scan by its cache key, on ``jobs`` processes when there are several."""
    metas: dict[str, dict[str, Any]] = {}
    if jobs > 1 and len(missing) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(jobs, len(missing))) as pool:
            results = pool.map(scan, [sf for _k, sf in missing])
            for n, ((key, _sf), meta) in enumerate(zip(missing, results, strict=True)):
                metas[key] = meta
                if progress is not None:
                    progress(n + 1, len(missing))
    else:
        for n, (key, sf) in enumerate(missing):
            metas[key] = scan(sf)
            if progress is not None:
                progress(n + 1, len(missing))
    return metas


def _row(
    sf: SessionFile, meta: dict[str, Any], ids: dict[str, str], prices: PriceTable
) -> SessionRow:
    index = sf.index or {}
    summary = index.get("summary") if isinstance(index.get("summary"), str) else meta["summary"]
    first = meta["first_prompt"] or _one_line(index.get("firstPrompt"))
    row = SessionRow(
        id=sf.id,
        short_id=ids.get(sf.id.split("/")[-1], sf.id),
        agent=sf.agent,
        path=str(sf.path),
        project=session_project(sf),
        parent=sf.parent,
        archived=sf.archived,
        modified=sf.mtime,
        bytes=sf.size,
        records=meta["records"],
        largest_line_bytes=meta["largest_line_bytes"],
        largest_line=meta["largest_line"],
        tokens=meta["tokens"],
        resume_tokens_before=meta["resume_tokens_before"],
        resume_tokens_after=meta["resume_tokens_after"],
        health=list(meta["health"]),
        title=summary or first,
        first_prompt=first,
        summary=summary,
        git_branch=meta["git_branch"] or index.get("gitBranch") or None,
        model=meta["model"],
        created=meta["created"] or index.get("created"),
        preset=meta["preset"],
        error=meta["error"],
    )
    row.cost_before = resume_cost(row.resume_tokens_before, row.model, prices)
    row.cost_after = resume_cost(row.resume_tokens_after, row.model, prices)
    row.recorded_usd = recorded_usd(meta["usage"], prices)
    return row


def _order(rows: list[SessionRow], sort: str) -> list[SessionRow]:
    def key(row: SessionRow) -> float:
        return -row.modified if sort == "age" else -row.bytes

    tops = sorted((r for r in rows if r.parent is None), key=key)
    children: dict[str, list[SessionRow]] = {}
    orphans: list[SessionRow] = []
    top_ids = {r.id for r in tops}
    for r in rows:
        if r.parent is not None:
            if r.parent in top_ids:
                children.setdefault(r.parent, []).append(r)
            else:
                orphans.append(r)
    out: list[SessionRow] = []
    for r in tops:
        out.append(r)
        out.extend(sorted(children.get(r.id, []), key=key))
    return out + sorted(orphans, key=key)


def relative_time(moment: float, now: float | None = None) -> str:
    """``5m ago``, ``3h ago``, ``2d ago``..."""
    delta = max(0.0, (time.time() if now is None else now) - moment)
    for unit, seconds in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= seconds:
            return f"{int(delta // seconds)}{unit} ago"
    return "just now"


def default_project() -> str:
    """The current directory, as ``--project .`` means."""
    return project_path(os.curdir)
