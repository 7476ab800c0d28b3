"""Remember ``ctx stats`` reports, so asking again about an unchanged file is instant.

The token cache (:mod:`ctxcli.services.tokens.count_cache`) saves the counting, but parsing, running
the stages and re-serialising still cost about as much as counting with a fast
tokenizer. A stats report is a pure function of the input bytes, its name, the
configuration and ctx's code, so the whole report is kept too, keyed by a hash of
all of them. Any change to one of them is a miss; a stored report that does not read
back exactly as it was written is a miss too.

Only chains of stages known to work offline and deterministically are remembered: a
stage that asks a model (``summarize``, ``compress_words``) or a third-party stage
could answer differently tomorrow. The ``anthropic`` tokenizer is excluded likewise.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ctxcli._version import __version__
from ctxcli.core.errors import OnInvalid
from ctxcli.core.io import Input, hash_input
from ctxcli.formats import registry as format_registry
from ctxcli.pipeline.results import Report
from ctxcli.pipeline.run import StageReport
from ctxcli.services.tokens.count_cache import TokenCache

if TYPE_CHECKING:
    from ctxcli.pipeline.config import Config
    from ctxcli.pipeline.results import Report
    from ctxcli.services.tokens.count_cache import TokenCache

__all__ = [
    "OFFLINE_STAGES",
    "OFFLINE_TOKENIZERS",
    "cached_stats",
    "code_fingerprint",
    "load_report",
    "report_key",
    "store_report",
]

OFFLINE_STAGES = frozenset(
    {
        "truncate_tool_output",
        "clear_tool_results",
        "keep_last",
        "head_tail",
        "strip_tool_calls",
        "strip_and_truncate",
        "nudge_early_exit",
        "clear_thinking",
        "dedupe_outputs",
        "drop_before_compaction",
        "prune_sidecars",
        "strip_system_reminders",
    }
)
"""Built-in stages whose output depends only on their input and options."""

OFFLINE_TOKENIZERS = frozenset({"cl100k", "o200k", "approx"})

_FINGERPRINT: bytes | None = None


def code_fingerprint() -> bytes:
    """A hash of ctx's own source files (names, sizes, modification times).

    An edited checkout must not be served reports of the code it had before, even
    when the version number did not change.
    """
    global _FINGERPRINT
    if _FINGERPRINT is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256(__version__.encode())
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith((".py", ".json", ".toml")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        _FINGERPRINT = h.digest()
    return _FINGERPRINT


def report_key(data: Input, path: str, config: Config, on_invalid: OnInvalid) -> bytes | None:
    """The cache key of ``ctx stats`` on ``data``, or None if it must not be cached."""
    if config.settings.tokenizer not in OFFLINE_TOKENIZERS:
        return None
    if any(sc.use not in OFFLINE_STAGES for sc in config.stages):
        return None
    if any(type(sc.options).__module__ != f"ctxcli.stages.{sc.use}" for sc in config.stages):
        return None  # a plugin registered under a built-in's name

    described = orjson.dumps(
        {
            # A format plugin could read the same bytes differently.
            "formats": [[name, type(fmt).__module__] for name, fmt in format_registry().items()],
            "settings": config.settings.model_dump(mode="json"),
            "stages": [[sc.use, sc.options.model_dump(mode="json")] for sc in config.stages],
            "path": path,
            "on_invalid": on_invalid.value,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    h = hashlib.sha256(b"stats-v1\0")
    h.update(code_fingerprint())
    h.update(hash_input(hashlib.sha256(), data).digest())
    h.update(described)
    return h.digest()[:16]


def load_report(cache: TokenCache, key: bytes) -> Report | None:
    """The remembered report for ``key``, or None."""
    blob = cache.get_blob(key)
    if blob is None:
        return None
    try:
        stored = orjson.loads(blob)
        values = {f.name: stored[f.name] for f in dataclasses.fields(Report) if f.name in stored}
        values["stages"] = [
            StageReport(
                stage=s["stage"],
                changed=s["changed"],
                offloaded=s["offloaded"],
                tokens_before=s["tokens_before"],
                tokens_after=s["tokens_after"],
                counters=dict(s.get("counters", {})),
                notes=tuple(s.get("notes", ())),
                fallbacks=tuple(s.get("fallbacks", ())),
            )
            for s in stored["stages"]
        ]
        report = Report(**values)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    # A report that does not read back exactly as stored (a field added with a
    # richer type, a damaged row) is recomputed rather than shown wrong.
    if report.to_dict() != stored:
        return None
    return report


def store_report(cache: TokenCache, key: bytes, report: Report) -> None:
    """Remember ``report`` under ``key``."""
    try:
        blob = orjson.dumps(report.to_dict())
    except TypeError:
        return
    cache.put_blob(key, blob)


def cached_stats(
    data: Input, path: str, config: Config, on_invalid: OnInvalid
) -> tuple[TokenCache | None, bytes | None, Report | None]:
    """Open the cache and look the report up: (cache, key, report or None).

    Close the returned cache when done; it is None when caching is off or unusable.
    """
    key = report_key(data, path, config, on_invalid)
    if key is None:
        return None, None, None
    # No one to tell here that a damaged cache was started anew: the run's counter
    # (which has the run's log) does that, and the report is remembered next time.
    cache = TokenCache.open_default(repair=False)
    if cache is None:
        return None, None, None
    return cache, key, load_report(cache, key)
