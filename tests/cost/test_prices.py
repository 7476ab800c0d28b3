"""The one price table: list prices, longest-prefix match, TOML overrides and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.cost.prices import (
    PRICES,
    ModelPrice,
    PriceTable,
    TokenUsage,
    input_price,
    load_price_table,
    resume_cost,
)


def test_longest_prefix_wins() -> None:
    table = PriceTable()
    opus_46 = table.lookup("claude-opus-4-6")
    opus_41 = table.lookup("claude-opus-4-1-20250805")
    assert opus_46 is not None and (opus_46.input, opus_46.output) == (5.0, 25.0)
    assert opus_41 is not None and (opus_41.input, opus_41.output) == (15.0, 75.0)
    mini = table.lookup("gpt-5-mini-2025-08-07")
    assert mini is not None and (mini.input, mini.cache_read, mini.output) == (0.25, 0.025, 2.0)
    assert table.lookup("gpt-5-codex") == table.lookup("gpt-5")
    assert table.lookup("llama-3") is None
    assert table.lookup(None) is None


def test_anthropic_cache_multipliers() -> None:
    sonnet = PriceTable().lookup("claude-sonnet-4-5-20250929")
    assert sonnet == ModelPrice.anthropic(3.0, 15.0)
    assert sonnet is not None
    assert (sonnet.cache_write_5m, sonnet.cache_write_1h, sonnet.cache_read) == pytest.approx(
        (3.75, 6.0, 0.3)
    )
    haiku = PriceTable().lookup("claude-3-5-haiku-20241022")
    assert haiku is not None and haiku.cache_write_1h == pytest.approx(1.6)


def test_openai_writes_cost_the_input_price() -> None:
    gpt5 = PriceTable().lookup("gpt-5")
    assert gpt5 is not None and gpt5.provider == "openai"
    assert (gpt5.cache_write_5m, gpt5.cache_write_1h, gpt5.cache_read) == (1.25, 1.25, 0.125)


def test_usd_of_a_usage() -> None:
    usage = TokenUsage(
        input=1_000_000, cache_read=2_000_000, cache_write_5m=1_000_000, cache_write_1h=0,
        output=100_000,
    )  # fmt: skip
    sonnet = PriceTable()["claude-sonnet-4-5"]
    assert sonnet.usd(usage) == pytest.approx(3.0 + 0.6 + 3.75 + 1.5)
    assert sonnet.read_usd(usage) == pytest.approx(0.6)
    assert (usage + usage).input_total == 2 * usage.input_total == 8_000_000


# The input prices of the table `ctx sessions` had before there was one table (USD/MTok).
SESSIONS_TABLE: dict[str, float] = {
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


def test_compatible_with_the_sessions_table() -> None:
    """``input_price``/``resume_cost`` answer what the sessions' own table answered."""
    table = load_price_table()
    for model, price in SESSIONS_TABLE.items():
        assert input_price(model, table) == price, model
    assert input_price("claude-opus-4-6-x", table) == 5.0
    assert input_price("gpt-5-mini-1", table) == 0.25
    assert input_price("unknown", table) is None and input_price("", table) is None
    assert resume_cost(200_000, "claude-sonnet-4-5", table) == pytest.approx(0.6)
    assert resume_cost(None, "claude-sonnet-4-5", table) is None
    assert resume_cost(1000, "unknown", table) is None


def test_every_model_of_the_old_table_is_priced() -> None:
    for model in SESSIONS_TABLE:
        assert PriceTable().lookup(model) is not None, model
    assert set(PRICES) >= {"claude-opus-4-5", "gpt-5-nano", "o4-mini", "codex-mini"}
    assert PriceTable().lookup("codex-mini-latest") == ModelPrice.openai(1.5, 0.375, 6.0)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_toml_tables_and_bare_numbers(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[prices."claude-next"]\ninput = 2.0\noutput = 10.0\n'
        '[prices."mine"]\nprovider = "anthropic"\ninput = 2.0\noutput = 10.0\n'
        '[prices."my-gpt"]\ninput = 1.0\ncached_input = 0.5\noutput = 4.0\n'
        '[prices."claude-sonnet-4-5"]\ncache_read = 0.25\n'
        '[prices]\n"claude-opus-4-6" = 10.0\n"local" = 0\n',
    )
    table = load_price_table(path)
    assert table["claude-next"] == table["mine"] == ModelPrice.anthropic(2.0, 10.0)
    assert table["my-gpt"] == ModelPrice.openai(1.0, 0.5, 4.0)
    assert table["claude-sonnet-4-5"].cache_read == 0.25
    assert table["claude-sonnet-4-5"].input == 3.0
    # A bare number is the input price; the cache prices follow it, the output stays.
    assert table["claude-opus-4-6"] == ModelPrice(10.0, 25.0, 12.5, 20.0, 1.0, "anthropic")
    assert table["claude-opus-4-6"] == ModelPrice.anthropic(10.0, 25.0)
    assert table.lookup("local-llama") == ModelPrice(0, 0, 0, 0, 0, "openai")


def test_ctx_prices_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTX_PRICES", str(_write(tmp_path, '"gpt-5" = 2.5\n')))
    gpt5 = load_price_table().lookup("gpt-5")
    assert gpt5 is not None and (gpt5.input, gpt5.cache_read, gpt5.output) == (2.5, 0.25, 10.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '"claude-sonnet-4" = "three"\n',
            "prices.toml: prices.claude-sonnet-4 = 'three' is invalid: must be a finite "
            "number of USD per million tokens, >= 0.",
        ),
        (
            '[prices."gpt-5"]\ninput = -1\n',
            "prices.toml: prices.gpt-5.input = -1 is invalid: must be a finite number of USD "
            "per million tokens, >= 0.",
        ),
        (
            '[prices."gpt-5"]\ncache = 1\n',
            "prices.toml: prices.gpt-5.cache is not a price: use one of input, output, "
            "cache_write_5m, cache_write_1h, cache_read, cached_input (USD per million "
            "tokens), or provider.",
        ),
        (
            '[prices."gpt-5"]\nprovider = "google"\n',
            "prices.toml: prices.gpt-5.provider = 'google' is invalid: use \"anthropic\" "
            '(cache writes cost extra) or "openai" (automatic caching).',
        ),
        (
            '[prices."mistral"]\ninput = 1\n',
            "prices.toml: prices.mistral is a new model: give at least input and output "
            "(USD per million tokens).",
        ),
        (
            '"mistral" = 1.5\n',
            "prices.toml: prices.mistral = 1.5 names a model the built-in table does not "
            'know: give a table [prices."mistral"] with input and output (USD per million '
            "tokens).",
        ),
        ("prices = [1, 2]\n", "prices.toml: prices = [1, 2] is invalid: must be a table of"),
        ("prices = \n", "prices.toml: invalid TOML: Invalid value (at line 1, column 10)"),
    ],
)
def test_errors_name_file_key_value_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_price_table("prices.toml")
    assert str(err.value).startswith(message)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere.toml: cannot read the price table"):
        load_price_table(tmp_path / "nowhere.toml")
