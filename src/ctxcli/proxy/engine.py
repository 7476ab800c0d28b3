"""The proxy's logic without HTTP: rewrite a request body, account for it, keep the stats.

:class:`ProxyCore` is what the ASGI app calls for every model request: ``prepare`` returns
the bytes to forward (the original bytes when nothing changed, or when the body cannot be
understood), ``record_usage`` takes the usage the upstream reported. Everything the proxy
reports (``/stats``, the ``-v`` line, ``ctx wrap``'s summary) comes from here.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxcli.agent.prefix_policy import PrefixPolicy
from ctxcli.agent.reducer import LIVE_PRESET, Reducer
from ctxcli.cost.blocks import body_request
from ctxcli.cost.prices import load_price_table
from ctxcli.pipeline.config import load_config
from ctxcli.proxy.billing import Bill, Meter
from ctxcli.proxy.conversations import (
    ConversationStore,
    Decision,
    MessageReducer,
    decide,
)
from ctxcli.proxy.routes import Provider, check_settings
from ctxcli.proxy.shapes import MAX_NESTING, Api, conversation_key, history_key, nests_deeper
from ctxcli.services.dirs import cache_dir, private_dir
from ctxcli.services.tokens.engines import load_engine

__all__ = [
    "Prepared",
    "ProxyCore",
    "ProxySettings",
    "RECENT_IN_STATS",
    "REDUCED_APIS",
    "RequestRecord",
    "STATS_FILE",
    "USAGE_FIELDS",
    "holds_offloaded_text",
    "new_run_dir",
    "prefix_policy",
]

RECENT_IN_STATS = 200
"""Requests listed one by one in the stats (the totals cover all of them)."""

STATS_FILE = "ctx-proxy-stats.json"
"""Written into the offload directory after every request (read by ``ctx mcp``)."""

REDUCED_APIS = ("anthropic", "openai_chat", "openai_responses")
"""The request shapes the reducer takes (all three)."""

USAGE_FIELDS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
)


@dataclass(frozen=True)
class ProxySettings:
    """How the proxy reduces, forwards and prices.

    Attributes:
        upstream: base URL of the Anthropic API.
        openai_upstream: base URL of the OpenAI API (Chat Completions and Responses).
        single_upstream: serve one API only: every request goes to its upstream, whatever
            its path (``ctx wrap``, where the proxy serves one client).
        other_paths: the API that paths other than the model endpoints go to when they
            carry no ``/anthropic`` or ``/openai`` prefix; None: nowhere (answered 404).
            See :mod:`ctxcli.proxy.routes`.
        preset: the named chain to run (default ``live``, the chain the prompt-cache bill
            chose; None: ``config``'s chain).
        config: a ctx.toml.
        offload_dir: where offloaded text goes; the hints name it, so the agent can read it
            (created 0700 if missing). None: a fresh ``run-*`` directory under ctx's cache
            directory, removed when the run ends unless a hint cites a file in it.
        clear_at_least: the floor of the reducer's prefix policy: a change to already-sent
            (cached) messages is made only when it reclaims at least this many tokens *and*
            pays for the cache it busts (:class:`~ctxcli.agent.prefix_policy.PrefixPolicy`;
            default 0: the bill alone decides).
        max_conversations: conversations remembered at once.
        idle_seconds: a conversation unseen this long is forgotten.
        prices: a TOML price table (see :mod:`ctxcli.cost.prices`; None: ``$CTX_PRICES``,
            else the built-in list prices), for the dollars ``/stats`` reports.
        tokenizer: counter for the estimates (``cl100k``, ``o200k``, ``approx``).
        read_tool: the Anthropic client's file-reading tool, named in the hints.
    """

    upstream: str = "https://api.anthropic.com"
    openai_upstream: str = "https://api.openai.com"
    single_upstream: Provider | None = None
    other_paths: Provider | None = None
    preset: str | None = LIVE_PRESET
    config: str | None = None
    offload_dir: str | None = None
    clear_at_least: int = PrefixPolicy().clear_at_least
    max_conversations: int = 64
    idle_seconds: float = 3600.0
    prices: str | None = None
    tokenizer: str = "cl100k"
    read_tool: str | None = "Read"


def prefix_policy(api: Api, clear_at_least: int) -> PrefixPolicy:
    """Build the prefix policy of the proxy's reducers.

    The prefix policy of the proxy's reducers: the API's cache and prices, the floor,
    and (Anthropic) the breakpoint the proxy adds on the reducer's ``cache_breakpoint``.
    """
    return replace(
        PrefixPolicy.for_api(api), marked=api == "anthropic", clear_at_least=clear_at_least
    )


def new_run_dir() -> str:
    """A fresh directory (0700) for one proxy run, under ctx's cache directory."""
    base = private_dir(cache_dir() / "proxy", tighten=True)
    return tempfile.mkdtemp(prefix="run-", dir=base)


def holds_offloaded_text(folder: str | os.PathLike[str]) -> bool:
    """True if ``folder`` holds a file a reducer offloaded (``<area>/<name>``)."""
    return any(p.is_file() for p in Path(folder).glob("*/*"))


@dataclass
class RequestRecord:
    """One model request as the proxy handled it."""

    api: Api
    conversation: str
    number: int
    tokens_in: int
    tokens_sent: int
    with_proxy: Bill
    without_proxy: Bill
    priced_as: str = ""
    reused: int = 0
    held_back: bool = False
    accepted_cut: bool = False
    marked: bool = False
    offloaded: int = 0
    upstream_usage: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the record as the JSON of ``/stats``."""
        return {
            "api": self.api,
            "conversation": self.conversation[:12],
            "number": self.number,
            "priced_as": self.priced_as,
            "tokens_in": self.tokens_in,
            "tokens_sent": self.tokens_sent,
            "with_proxy": self.with_proxy.as_dict(),
            "without_proxy": self.without_proxy.as_dict(),
            "held_back": self.held_back,
            "new_cut": self.accepted_cut,
            "marked": self.marked,
            "upstream_usage": self.upstream_usage,
        }

    def line(self) -> str:
        """The ``-v`` line."""
        after, before = self.with_proxy, self.without_proxy
        saved = _saved(before.usd, after.usd)
        note = " (held back a cut that does not pay yet)" if self.held_back else ""
        note += " (new cut)" if self.accepted_cut else ""
        note += " (cache bust)" if after.busts else ""
        return (
            f"{self.api} {self.conversation[:8]} #{self.number}: tokens in {self.tokens_in:,}, "
            f"sent {self.tokens_sent:,}, cache-preserved prefix {after.cache_read:,}; "
            f"billed input ~${after.usd:.4f} vs ~${before.usd:.4f} without ctx "
            f"({saved:.1f}% saved, priced as {self.priced_as}){note}"
        )


def _saved(before: float, after: float) -> float:
    return 100.0 * (before - after) / before if before else 0.0


@dataclass
class Prepared:
    """A request body ready to forward."""

    body: bytes
    record: RequestRecord | None


class ProxyCore:
    """Reduces requests per conversation and keeps the figures.

    Call :meth:`finish` when the run ends: it removes a run directory the core made
    and no hint cites.

    Args:
        settings: see :class:`ProxySettings`.
        log: receives one line per request (the ``-v`` output).
        warn: receives warnings (a request forwarded unchanged, and why).
        make_reducer: a reducer for a new conversation (default: :class:`ctxcli.agent.reducer.Reducer`
            with the settings' preset/config, offload directory and :func:`prefix_policy`).
        clock: the time of a request, in seconds (the prompt cache's TTLs run on it).
    """

    def __init__(
        self,
        settings: ProxySettings,
        *,
        log: Callable[[str], None] | None = None,
        warn: Callable[[str], None] | None = None,
        make_reducer: Callable[[Api], MessageReducer] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        check_settings(settings)
        self.settings = settings
        self.clock = clock
        self.log = log
        self.warn = warn or (lambda _msg: None)
        self._owns_dir = settings.offload_dir is None
        if settings.offload_dir is None:
            self.offload_dir = new_run_dir()
        else:
            self.offload_dir = str(private_dir(Path(settings.offload_dir).absolute()))
        """The directory the hints cite (absolute)."""
        self._config = load_config(settings.config) if settings.config else None
        self._make_reducer = make_reducer or self._default_reducer
        self.store = ConversationStore(
            self._make_reducer,
            max_conversations=settings.max_conversations,
            idle_seconds=settings.idle_seconds,
        )
        _, fn = load_engine(settings.tokenizer)
        self.count_text: Callable[[str], int] = functools.lru_cache(maxsize=65536)(fn)
        self._lock = threading.Lock()
        self.meter = Meter(load_price_table(settings.prices), self.count_text)
        self.records: list[RequestRecord] = []
        self.max_records = 1000
        self.totals = {"requests": 0, "passthrough": 0, "tokens_in": 0, "tokens_sent": 0}
        self.totals.update(held_back=0, cuts=0, offloaded=0)
        self.bills: dict[str, dict[str, Bill]] = {}
        self.usage: dict[str, int] = dict.fromkeys(USAGE_FIELDS, 0)

    def _default_reducer(self, api: Api) -> MessageReducer:
        return Reducer(
            config=self._config,
            preset=self.settings.preset,
            offload_dir=self.offload_dir,
            api=api,
            read_tool=self.settings.read_tool if api == "anthropic" else None,
            prefix_policy=prefix_policy(api, self.settings.clear_at_least),
        )

    def prepare(self, api: Api, raw: bytes) -> Prepared:
        """The body to forward for ``raw``; never raises for a body it cannot handle.

        A body ctx cannot read (not JSON, nested deeper than it reads, a value its JSON
        encoder refuses such as a lone surrogate) goes out as the client wrote it, with one
        warning: the API, not the proxy, answers it.
        """
        try:
            return self._prepare(api, raw)
        except Exception as exc:  # the client's request must reach the API whatever ctx made of it
            return self._passthrough(raw, f"ctx cannot read it ({type(exc).__name__}: {exc})")

    def _prepare(self, api: Api, raw: bytes) -> Prepared:
        try:
            body = json.loads(raw)
        except ValueError:
            return self._passthrough(raw, "the request body is not JSON")
        except RecursionError:  # deeper than Python's parser goes (~1,000 levels)
            return self._passthrough(raw, "the request body nests too deeply to parse")
        if not isinstance(body, dict):
            return self._passthrough(raw, "the request body is not a JSON object")
        if nests_deeper(body):
            return self._passthrough(
                raw,
                f"its history, system or tools nest deeper than the {MAX_NESTING} levels ctx reads",
            )
        field_name = history_key(api)
        history = body.get(field_name)
        key = conversation_key(body, api)
        # A Responses request continuing a stored response carries only the new items.
        chained = api == "openai_responses" and body.get("previous_response_id")
        if not isinstance(history, list) or key is None or chained or api not in REDUCED_APIS:
            return self._account(api, raw, body, body, None, "-")
        try:
            conv = self.store.get(key, api)
            system = body.get("system") if api == "anthropic" else None
            with conv.lock:
                decision = decide(conv, history, system, body=body, api=api, at=self.clock())
                number = conv.requests
            if decision.refused:
                self.warn(f"the reduced history would be rejected ({decision.refused}); sent as is")
        except Exception as exc:  # a reducer failure must not fail the client's request
            return self._passthrough(raw, f"the reducer failed ({type(exc).__name__}: {exc})")
        if decision.messages == history:
            out_body, out_raw = body, raw
        else:
            out_body = dict(body)
            out_body[field_name] = decision.messages
            out_raw = json.dumps(out_body, ensure_ascii=False).encode()
        return self._account(api, out_raw, body, out_body, decision, key, number)

    def _passthrough(self, raw: bytes, why: str) -> Prepared:
        self.warn(f"forwarding a request unchanged: {why}")
        with self._lock:
            self.totals["passthrough"] += 1
        return Prepared(raw, None)

    def _account(
        self,
        api: Api,
        out_raw: bytes,
        body: dict[str, Any],
        out_body: dict[str, Any],
        decision: Decision | None,
        key: str,
        number: int = 0,
    ) -> Prepared:
        at = self.clock()
        original = body_request(body, api, at=at)
        sent = original if out_body is body else body_request(out_body, api, at=at)
        family = "anthropic" if api == "anthropic" else "openai"
        with self._lock:
            without = self.meter.price(family, original, sent=False)
            with_ = self.meter.price(family, sent, sent=True)
            record = RequestRecord(
                api=api,
                conversation=key,
                number=number,
                tokens_in=without.input_tokens,
                tokens_sent=with_.input_tokens,
                with_proxy=with_,
                without_proxy=without,
                priced_as=self.meter.price_of(family, original.model)[0],
            )
            if decision is not None:
                record.reused = decision.reused
                record.held_back = decision.held_back
                record.accepted_cut = decision.accepted_cut
                record.marked = decision.marked
                record.offloaded = decision.offloaded
                self.totals["held_back"] += int(decision.held_back)
                self.totals["cuts"] += int(decision.accepted_cut)
                self.totals["offloaded"] += decision.offloaded
            self.totals["requests"] += 1
            self.totals["tokens_in"] += record.tokens_in
            self.totals["tokens_sent"] += record.tokens_sent
            bills = self.bills.setdefault(api, {"with_proxy": Bill(), "without_proxy": Bill()})
            bills["with_proxy"] += with_
            bills["without_proxy"] += without
            self.records.append(record)
            del self.records[: -self.max_records]
        if self.log is not None:
            self.log(record.line())
        return Prepared(out_raw, record)

    def record_usage(self, record: RequestRecord | None, usage: dict[str, Any]) -> None:
        """Add what the upstream reported it billed for a request."""
        clean = {k: int(v) for k, v in usage.items() if k in USAGE_FIELDS and isinstance(v, int)}
        with self._lock:
            for k, v in clean.items():
                self.usage[k] += v
            if record is not None:
                for k, v in clean.items():
                    record.upstream_usage[k] = record.upstream_usage.get(k, 0) + v
        self.write_stats()

    def stats(self) -> dict[str, Any]:
        """Everything ``/stats`` shows, as JSON-ready data."""
        with self._lock:
            by_api: dict[str, Any] = {}
            for api, bills in self.bills.items():
                before, after = bills["without_proxy"].usd, bills["with_proxy"].usd
                by_api[api] = {
                    "with_proxy": bills["with_proxy"].as_dict(),
                    "without_proxy": bills["without_proxy"].as_dict(),
                    "billed_saved_pct": round(_saved(before, after), 2),
                    "usd_saved": round(before - after, 6),
                }
            tokens_in, tokens_sent = self.totals["tokens_in"], self.totals["tokens_sent"]
            return {
                **self.totals,
                "tokens_saved_pct": round(_saved(tokens_in, tokens_sent), 2),
                "conversations": len(self.store),
                "expired_conversations": self.store.expired,
                "by_api": by_api,
                "upstream_usage": dict(self.usage),
                "offload_dir": self.offload_dir,
                "preset": self.settings.preset,
                "clear_at_least": self.settings.clear_at_least,
                "recent_requests": [r.as_dict() for r in self.records[-RECENT_IN_STATS:]],
            }

    def write_stats(self) -> None:
        """Write :meth:`stats` to the offload directory (atomically, readable by its owner only)."""
        target = Path(self.offload_dir) / STATS_FILE
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{STATS_FILE}.", dir=self.offload_dir)
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(self.stats(), indent=2))
            os.replace(tmp, target)
        except OSError as exc:
            self.warn(f"cannot write {target}: {exc}")

    def finish(self) -> str | None:
        """End the run: the directory the hints cite, or None when nothing was offloaded.

        A run directory the core made (no ``offload_dir`` in the settings) is removed when
        it holds no offloaded text; a directory the caller named is never touched.
        """
        if not self._owns_dir:
            return self.offload_dir
        if holds_offloaded_text(self.offload_dir):
            return self.offload_dir
        shutil.rmtree(self.offload_dir, ignore_errors=True)
        return None
