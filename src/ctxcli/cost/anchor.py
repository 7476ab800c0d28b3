"""The replay checked request by request against the records; counterfactuals priced from them.

Every Claude Code response records its input, cache-write (5m/1h) and cache-read tokens;
every Codex call its input and cached input. :func:`check_requests` puts each rebuilt
request beside its own record: the error of each figure is the replayed minus the
recorded tokens, as a share of the request's recorded input (so a figure recorded as
zero still has an error), and of its price.

:func:`anchored_usd` prices a counterfactual from the records: a request the file
records costs what it recorded plus what the cache model says the counterfactual
*changes* (its price with the counterfactual minus its replayed price); a request
without a record costs what the model says. The as-run path is then the recorded bill
exactly, and the model's error only touches the part that differs.

Example:
    >>> from ctxcli.cost.prices import TokenUsage
    >>> c = RequestCheck("m1", TokenUsage(input=10, cache_write_5m=990), 0.0049,
    ...                  TokenUsage(input=10, cache_write_5m=940), 0.0047)
    >>> round(c.write_error, 3), round(c.input_error, 3)
    (-0.05, -0.05)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.cost.prices import TokenUsage
from ctxcli.cost.recorded import RecordedRequest
from ctxcli.cost.replay import Replay, ReplayedRequest

__all__ = [
    "DEFAULT_TOLERANCE",
    "Anchoring",
    "RequestCheck",
    "anchored_usd",
    "check_requests",
    "recorded_for",
]

DEFAULT_TOLERANCE = 0.05
"""A request is within tolerance when each of its three input figures is within 5% of
its recorded input."""

FIGURES = ("input", "write", "read", "usd")


@dataclass(frozen=True, slots=True)
class RequestCheck:
    """One rebuilt request beside its record.

    Attributes:
        key: the call's id.
        recorded: its usage as the file records it.
        recorded_usd: its recorded price (None: model not in the price table).
        replayed: its usage as the cache model bills the rebuilt request.
        replayed_usd: its replayed price.
    """

    key: str
    recorded: TokenUsage
    recorded_usd: float | None
    replayed: TokenUsage
    replayed_usd: float | None

    def _share(self, replayed: int, recorded: int) -> float:
        base = self.recorded.input_total
        return (replayed - recorded) / base if base else 0.0

    @property
    def input_error(self) -> float:
        """All input tokens, replayed vs recorded, as a share of the recorded input."""
        return self._share(self.replayed.input_total, self.recorded.input_total)

    @property
    def write_error(self) -> float:
        """Cache writes (5m and 1h), as a share of the recorded input."""
        return self._share(self.replayed.cache_write, self.recorded.cache_write)

    @property
    def read_error(self) -> float:
        """Cache reads, as a share of the recorded input."""
        return self._share(self.replayed.cache_read, self.recorded.cache_read)

    @property
    def usd_error(self) -> float:
        """Relative error of the request's price (0 when either is unpriced)."""
        if not self.recorded_usd or self.replayed_usd is None:
            return 0.0
        return self.replayed_usd / self.recorded_usd - 1

    def error(self, figure: str) -> float:
        """The error of ``figure`` (``input``, ``write``, ``read`` or ``usd``)."""
        return {
            "input": self.input_error,
            "write": self.write_error,
            "read": self.read_error,
            "usd": self.usd_error,
        }[figure]

    def within(self, tolerance: float) -> bool:
        """Its three input figures are each within ``tolerance`` of its recorded input."""
        return all(abs(self.error(f)) <= tolerance for f in ("input", "write", "read"))

    def to_dict(self) -> dict[str, Any]:
        """The errors as JSON."""
        return {f"{f}_error": round(self.error(f), 6) for f in FIGURES}


@dataclass(frozen=True)
class Anchoring:
    """Every recorded request checked against the replay.

    Attributes:
        checks: one per request the file records, in order.
        tolerance: the share of a request's input each figure may be off by.
    """

    checks: tuple[RequestCheck, ...]
    tolerance: float = DEFAULT_TOLERANCE

    @property
    def within(self) -> int:
        """Requests whose three input figures are all within tolerance."""
        return sum(c.within(self.tolerance) for c in self.checks)

    def distribution(self, figure: str) -> dict[str, float]:
        """Return the median, 90th percentile and largest absolute error of ``figure``.

        And its mean signed error.
        """
        errors = sorted(abs(c.error(figure)) for c in self.checks)
        if not errors:
            return {"median": 0.0, "p90": 0.0, "max": 0.0, "mean": 0.0}
        mean = sum(c.error(figure) for c in self.checks) / len(errors)
        return {
            "median": round(_quantile(errors, 0.5), 6),
            "p90": round(_quantile(errors, 0.9), 6),
            "max": round(errors[-1], 6),
            "mean": round(mean, 6),
        }

    def misses(self) -> list[tuple[int, RequestCheck]]:
        """The requests outside tolerance, with their index."""
        return [(n, c) for n, c in enumerate(self.checks) if not c.within(self.tolerance)]

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape of the per-request errors."""
        return {
            "requests": len(self.checks),
            "tolerance": self.tolerance,
            "within_tolerance": self.within,
            "errors": {f: self.distribution(f) for f in FIGURES},
        }


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values (nearest rank)."""
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def recorded_for(
    recorded: Sequence[RecordedRequest], replay: Replay
) -> list[RecordedRequest | None]:
    """The record of each replayed request, by key (None: the file records none)."""
    by_key = {r.key: r for r in recorded}
    return [by_key.get(r.key) for r in replay.requests]


def check_requests(
    recorded: Sequence[RecordedRequest],
    replay: Replay,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Anchoring:
    """Each replayed request that the file records, beside its record."""
    checks = [
        RequestCheck(r.key, rec.usage, rec.usd, r.usage, r.usd)
        for r, rec in zip(replay.requests, recorded_for(recorded, replay), strict=True)
        if rec is not None
    ]
    return Anchoring(tuple(checks), tolerance)


def anchored_usd(
    recorded: Sequence[RecordedRequest | None],
    base: Sequence[ReplayedRequest],
    other: Sequence[ReplayedRequest],
) -> float:
    """A counterfactual's bill anchored on the records (see the module docstring).

    Args:
        recorded: each request's record, aligned with ``base`` (None: none).
        base: the as-run requests as the cache model prices them.
        other: the requests under the counterfactual, matched to ``base`` by key (one
            the as-run path does not have, such as an extra summarising call, is priced
            by the model alone).
    """
    known = {b.key: (rec, b) for rec, b in zip(recorded, base, strict=True)}
    total = 0.0
    for o in other:
        rec, b = known.get(o.key, (None, None))
        if rec is not None and rec.usd is not None and b is not None and b.usd is not None:
            # A request cannot cost less than nothing, whatever the model's delta.
            total += max(0.0, rec.usd + (o.usd or 0.0) - b.usd)
        else:
            total += o.usd or 0.0
    return total
