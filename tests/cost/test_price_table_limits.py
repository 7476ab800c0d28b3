"""The price table takes finite, non-negative prices only, and a file it cannot parse is exit 2.

Issue 41 item 16: TOML has ``nan`` and ``inf``; ``ctx cost`` printed ``nan`` bills with exit 0
and the proxy's ``/stats`` answered 500. Item 15 (its price-table part): a deeply nested
array in the ``CTX_PRICES`` file was an internal error (exit 123).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcli.core.errors import ConfigError
from ctxcli.cost.prices import load_price_table
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from support.cli import invoke
from support.cost_sessions import ClaudeSession, text, usage

BAD = [
    ('[prices."claude-sonnet-4-5"]\ninput = nan\n', "prices.claude-sonnet-4-5.input = nan"),
    ('[prices."claude-sonnet-4-5"]\noutput = inf\n', "prices.claude-sonnet-4-5.output = inf"),
    ('[prices."gpt-5"]\ncached_input = -inf\n', "prices.gpt-5.cached_input = -inf"),
    ('[prices."gpt-5"]\ncache_read = -nan\n', "prices.gpt-5.cache_read = nan"),
    ('[prices]\n"claude-sonnet-4-5" = inf\n', "prices.claude-sonnet-4-5 = inf"),
    (
        '[prices."my-model"]\ninput = 1.0\noutput = +inf\n',
        "prices.my-model.output = inf",
    ),
]
CONSTRAINT = "is invalid: must be a finite number of USD per million tokens, >= 0."


@pytest.mark.parametrize(("toml", "named"), BAD, ids=[named for _, named in BAD])
def test_a_price_that_is_no_number_is_refused_naming_file_model_and_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_price_table(path)
    assert str(err.value) == f"{path}: {named} {CONSTRAINT}"


def session(tmp_path: Path) -> Path:
    s = ClaudeSession()
    s.user("Hi.", 0)
    s.response("msg_1", [text("Hello.")], 2, usage(inp=10, write=2000, out=5))
    return s.write(tmp_path / "s.jsonl")


def test_ctx_cost_exits_2_on_a_nan_price_and_prints_no_bill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices."claude-sonnet-4-5"]\ninput = nan\n', encoding="utf-8")
    monkeypatch.setenv("CTX_PRICES", str(prices))
    result = invoke(["cost", str(session(tmp_path)), "--json"], code=2)
    assert result.stdout == ""
    assert f"{prices}: prices.claude-sonnet-4-5.input = nan {CONSTRAINT}" in result.stderr


def test_the_proxy_refuses_to_start_on_an_infinite_price(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"claude-sonnet-4-5" = inf\n', encoding="utf-8")
    settings = ProxySettings(offload_dir=str(tmp_path / "offload"), prices=str(prices))
    with pytest.raises(ConfigError, match=r"prices\.claude-sonnet-4-5 = inf is invalid"):
        ProxyCore(settings)


@pytest.mark.parametrize("depth", [500, 5_000])
def test_a_deeply_nested_price_file_is_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text("x = " + "[" * depth + "]" * depth + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"prices\.toml: invalid TOML: .*nested too deeply"):
        load_price_table(prices)
    monkeypatch.setenv("CTX_PRICES", str(prices))
    result = invoke(["cost", str(session(tmp_path))], code=2)
    assert str(prices) in result.stderr and "nested too deeply" in result.stderr
