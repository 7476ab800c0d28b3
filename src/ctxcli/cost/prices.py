"""One price table: what a model charges per million tokens, by kind of token (never fetched).

Anthropic bills five kinds of token: uncached input, output, cache writes that live 5
minutes (1.25x input) or 1 hour (2x input), and cache reads (0.1x input). OpenAI bills
three: uncached input, cached input, output; writing its cache costs nothing extra, so
both write prices equal the input price. A model is matched by the longest prefix of its
name in the table. Override or extend the table with a TOML file (``CTX_PRICES`` or an
explicit path)::

    [prices."claude-sonnet-4"]          # a table: any of the five prices, USD per MTok
    input = 3.0
    output = 15.0                       # the cache prices follow from input unless given

    [prices."my-model"]
    provider = "openai"                 # whose cache rules (default: by the name)
    input = 1.25
    cached_input = 0.125                # OpenAI's word for a cache read
    output = 10.0

    [prices]
    "claude-opus-4-6" = 5.0             # a bare number: the input price of a known
                                        # model; its cache prices keep their ratio to it
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from functools import reduce
from operator import add
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from ctxcli.core.errors import ConfigError
from ctxcli.core.io import parse_toml

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "PRICES",
    "BillTotals",
    "ModelPrice",
    "Priced",
    "PriceTable",
    "TokenUsage",
    "input_price",
    "load_price_table",
    "resume_cost",
    "sum_fields",
]

Provider = Literal["anthropic", "openai"]
MILLION = 1_000_000
_Summed = TypeVar("_Summed", bound="DataclassInstance")


def sum_fields(a: _Summed, b: _Summed) -> _Summed:
    """Two dataclass values of one type added field by field (a field adds its own way)."""
    return type(a)(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(a)))


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens of one request (or a sum of them), split the way the provider bills them.

    ``input`` is the uncached input only; ``cache_read`` is OpenAI's cached input too.
    """

    input: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    output: int = 0

    @property
    def cache_write(self) -> int:
        """Tokens written to the cache, both lifetimes."""
        return self.cache_write_5m + self.cache_write_1h

    @property
    def input_total(self) -> int:
        """All input tokens the request sent: uncached, read and written."""
        return self.input + self.cache_read + self.cache_write

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return sum_fields(self, other)


class Priced(Protocol):
    """A request with its tokens and its price (None: its model has no price)."""

    @property
    def usage(self) -> TokenUsage:
        """Tokens the request used, by kind."""

    @property
    def usd(self) -> float | None:
        """Dollars the request cost (None: its model has no price)."""

    @property
    def read_usd(self) -> float | None:
        """Dollars of its cache reads alone (None: no price)."""


class BillTotals:
    """The totals of a bill made of priced ``requests`` (a base for the bill classes)."""

    __slots__ = ()
    requests: tuple[Priced, ...]

    @property
    def usage(self) -> TokenUsage:
        """Tokens of all requests."""
        return reduce(add, (r.usage for r in self.requests), TokenUsage())

    @property
    def usd(self) -> float:
        """Dollars of the requests whose model has a price."""
        return sum(r.usd for r in self.requests if r.usd is not None)

    @property
    def read_usd(self) -> float:
        """Dollars paid for cache reads."""
        return sum(r.read_usd for r in self.requests if r.read_usd is not None)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens of one model, for each kind of token it bills."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    provider: Provider = "anthropic"

    @classmethod
    def anthropic(cls, input: float, output: float) -> ModelPrice:
        """A Claude model at Anthropic's cache multipliers (1.25x, 2x, 0.1x of input)."""
        return cls(input, output, input * 1.25, input * 2.0, input * 0.1, "anthropic")

    @classmethod
    def openai(cls, input: float, cached_input: float, output: float) -> ModelPrice:
        """An OpenAI model: writing the cache costs the input price, reading it less."""
        return cls(input, output, input, input, cached_input, "openai")

    def usd(self, usage: TokenUsage) -> float:
        """What ``usage`` costs at these prices, in US dollars."""
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_write_5m * self.cache_write_5m
            + usage.cache_write_1h * self.cache_write_1h
            + usage.cache_read * self.cache_read
        ) / MILLION

    def read_usd(self, usage: TokenUsage) -> float:
        """The part of :meth:`usd` that pays for cache reads."""
        return usage.cache_read * self.cache_read / MILLION

    def with_input(self, input: float) -> ModelPrice:
        """Reprice with the input price ``input``, the cache prices in proportion.

        These prices with the input price ``input``; the cache prices keep their ratio
        to it (Anthropic's multipliers), the output price stays.
        """
        if self.input == 0:
            return replace(self, input=input)
        f = input / self.input
        return ModelPrice(
            input,
            self.output,
            self.cache_write_5m * f,
            self.cache_write_1h * f,
            self.cache_read * f,
            self.provider,
        )


_A = ModelPrice.anthropic
_O = ModelPrice.openai

# Published list prices, USD per million tokens, as on the providers' pricing pages in
# January 2026 (Anthropic: docs.claude.com "Pricing"; OpenAI: platform.openai.com
# "Pricing", standard tier). Longest prefix wins, so "claude-opus-4-5" beats
# "claude-opus-4" and "gpt-5-mini" beats "gpt-5".
PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-6": _A(5.0, 25.0),
    "claude-opus-4-5": _A(5.0, 25.0),
    "claude-opus-4-1": _A(15.0, 75.0),
    "claude-opus-4": _A(15.0, 75.0),
    "claude-sonnet-4-5": _A(3.0, 15.0),
    "claude-sonnet-4": _A(3.0, 15.0),
    "claude-3-7-sonnet": _A(3.0, 15.0),
    "claude-3-5-sonnet": _A(3.0, 15.0),
    "claude-haiku-4-5": _A(1.0, 5.0),
    "claude-3-5-haiku": _A(0.8, 4.0),
    "gpt-5-codex": _O(1.25, 0.125, 10.0),
    "gpt-5-mini": _O(0.25, 0.025, 2.0),
    "gpt-5-nano": _O(0.05, 0.005, 0.40),
    "gpt-5": _O(1.25, 0.125, 10.0),
    "gpt-4.1": _O(2.0, 0.50, 8.0),
    "gpt-4o": _O(2.50, 1.25, 10.0),
    "o3": _O(2.0, 0.50, 8.0),
    "o4-mini": _O(1.10, 0.275, 4.40),
    "codex-mini": _O(1.50, 0.375, 6.0),  # codex-mini-latest
}

# TOML keys of a model's table, and the ModelPrice field each sets.
_KEYS = {
    "input": "input",
    "output": "output",
    "cache_write_5m": "cache_write_5m",
    "cache_write_1h": "cache_write_1h",
    "cache_read": "cache_read",
    "cached_input": "cache_read",
}
PROVIDERS = ("anthropic", "openai")


class PriceTable(Mapping[str, ModelPrice]):
    """Model-name prefixes and their prices; :meth:`lookup` matches the longest prefix."""

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self._prices = dict(PRICES if prices is None else prices)

    def __getitem__(self, key: str) -> ModelPrice:
        return self._prices[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._prices)

    def __len__(self) -> int:
        return len(self._prices)

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The prices of ``model`` (longest matching prefix), or None if unknown."""
        if not model:
            return None
        best = max((k for k in self._prices if model.startswith(k)), key=len, default=None)
        return self._prices[best] if best is not None else None


def load_price_table(path: str | Path | None = None) -> PriceTable:
    """The built-in table, updated from ``path`` (or ``$CTX_PRICES``) when given.

    Raises:
        ConfigError: the file cannot be read or parsed, or a price is not a finite
            number >= 0.
    """
    table = dict(PRICES)
    source = str(path or os.environ.get("CTX_PRICES") or "")
    if not source:
        return PriceTable(table)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the price table ({exc.strerror}).") from None
    data = parse_toml(text, source)
    prices = data.get("prices", data)
    if not isinstance(prices, dict):
        raise ConfigError(
            f"{source}: prices = {prices!r} is invalid: must be a table of "
            'model = USD per million input tokens, or [prices."model"] tables.'
        )
    for model, value in prices.items():
        # A new name inherits what it can from the entry its prefix matches.
        table[model] = _entry(source, model, value, PriceTable(table).lookup(model))
    return PriceTable(table)


def _entry(source: str, model: str, value: Any, known: ModelPrice | None) -> ModelPrice:
    """One model's prices from its TOML value: a bare input price or a table."""
    if not isinstance(value, dict):
        price = _usd(source, f"prices.{model}", value)
        if known is not None:
            return known.with_input(price)
        if price == 0:
            return ModelPrice(0.0, 0.0, 0.0, 0.0, 0.0, _provider_of(model))
        raise ConfigError(
            f"{source}: prices.{model} = {value!r} names a model the built-in table does "
            f'not know: give a table [prices."{model}"] with input and output '
            "(USD per million tokens)."
        )
    value = dict(value)
    provider = _provider(source, model, value.pop("provider", None), known)
    for key in value:
        if key not in _KEYS:
            raise ConfigError(
                f"{source}: prices.{model}.{key} is not a price: use one of "
                f"{', '.join(_KEYS)} (USD per million tokens), or provider."
            )
    given = {_KEYS[k]: _usd(source, f"prices.{model}.{k}", v) for k, v in value.items()}
    base = known if known is not None and known.provider == provider else None
    if base is None:
        if "input" not in given or "output" not in given:
            raise ConfigError(
                f"{source}: prices.{model} is a new model: give at least input and output "
                "(USD per million tokens)."
            )
        base = _derived(provider, given["input"], given["output"], given.get("cache_read"))
    elif "input" in given:
        base = base.with_input(given["input"])
    return ModelPrice(
        input=given.get("input", base.input),
        output=given.get("output", base.output),
        cache_write_5m=given.get("cache_write_5m", base.cache_write_5m),
        cache_write_1h=given.get("cache_write_1h", base.cache_write_1h),
        cache_read=given.get("cache_read", base.cache_read),
        provider=base.provider,
    )


def _provider(source: str, model: str, value: Any, known: ModelPrice | None) -> Provider:
    """The provider a model's table names, else the known one's, else by its name."""
    if value is None:
        return known.provider if known is not None else _provider_of(model)
    if value not in PROVIDERS:
        raise ConfigError(
            f"{source}: prices.{model}.provider = {value!r} is invalid: use "
            '"anthropic" (cache writes cost extra) or "openai" (automatic caching).'
        )
    return "anthropic" if value == "anthropic" else "openai"


def _derived(provider: Provider, input: float, output: float, cached: float | None) -> ModelPrice:
    """A new model's full price list from its input and output prices."""
    if provider == "openai":
        return ModelPrice.openai(input, input * 0.1 if cached is None else cached, output)
    return ModelPrice.anthropic(input, output)


def _provider_of(model: str) -> Provider:
    """Which provider's cache rules a model name implies (Claude models are Anthropic's)."""
    return "anthropic" if model.startswith("claude") else "openai"


def _usd(source: str, key: str, value: Any) -> float:
    """A price from the file: a finite number >= 0, else a ConfigError naming the key.

    TOML has ``nan`` and ``inf``: neither is a price (a ``nan`` bill is no bill).
    """
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        raise ConfigError(
            f"{source}: {key} = {value!r} is invalid: must be a finite number of USD per "
            "million tokens, >= 0."
        )
    return float(value)


def input_price(model: str | None, table: PriceTable) -> float | None:
    """USD per million uncached input tokens for ``model``, or None if unknown.

    The drop-in for ``ctxcli.sessions.prices.price_of``.
    """
    price = table.lookup(model)
    return price.input if price is not None else None


def resume_cost(tokens: int | None, model: str | None, table: PriceTable) -> float | None:
    """USD for sending ``tokens`` once as uncached input to ``model`` (a cold resume).

    The drop-in for ``ctxcli.sessions.prices.resume_cost``.
    """
    price = input_price(model, table)
    if price is None or tokens is None:
        return None
    return tokens * price / MILLION
