"""What one resume costs: a small, overridable table of input prices (never fetched).

Prices are US dollars per million input tokens, matched by the longest model-name
prefix. A resume sends the whole context as input; prompt caching can make it
cheaper, so the figure is the uncached upper bound. Override or extend the table
with a TOML file (``CTX_PRICES`` or the ``--prices`` option)::

    [prices]
    "claude-sonnet-4" = 3.0
    "my-local-model" = 0
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from ctxcli.core.errors import ConfigError

# Published list prices for uncached input, USD per million tokens (late 2025).
PRICES: dict[str, float] = {
    "claude-opus-4-5": 5.0,
    "claude-opus-4-6": 5.0,
    "claude-opus-4": 15.0,
    "claude-sonnet-4": 3.0,
    "claude-3-7-sonnet": 3.0,
    "claude-3-5-sonnet": 3.0,
    "claude-haiku-4-5": 1.0,
    "claude-3-5-haiku": 0.8,
    "gpt-5-mini": 0.25,
    "gpt-5-nano": 0.05,
    "gpt-5": 1.25,
    "gpt-4.1": 2.0,
    "gpt-4o": 2.5,
    "o3": 2.0,
    "o4-mini": 1.1,
    "codex-mini": 1.5,
}


def load_prices(path: str | Path | None = None) -> dict[str, float]:
    """The built-in table, updated from ``path`` (or ``$CTX_PRICES``) when given.

    Raises:
        ConfigError: the file cannot be read or a price is not a number.
    """
    table = dict(PRICES)
    source = path or os.environ.get("CTX_PRICES")
    if not source:
        return table
    try:
        data = tomllib.loads(Path(source).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the price table ({exc.strerror}).") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML ({exc}).") from None
    prices = data.get("prices", data)
    if not isinstance(prices, dict):
        raise ConfigError(f"{source}: [prices] must be a table of model = USD per million.")
    for model, value in prices.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ConfigError(
                f"{source}: prices.{model} = {value!r} is invalid: "
                "must be a number of USD per million input tokens, >= 0."
            )
        table[model] = float(value)
    return table


def price_of(model: str | None, table: dict[str, float]) -> float | None:
    """USD per million input tokens for ``model`` (longest prefix), or None if unknown."""
    if not model:
        return None
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None


def resume_cost(tokens: int | None, model: str | None, table: dict[str, float]) -> float | None:
    """USD for sending ``tokens`` once as uncached input to ``model``."""
    price = price_of(model, table)
    if price is None or tokens is None:
        return None
    return tokens * price / 1_000_000
