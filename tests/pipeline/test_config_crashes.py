"""A config ctx cannot use is a usage error naming the file and key, never a crash (issue 41
item 15, the config part).

A TOML array nested ~500 deep exhausted the parser's recursion (exit 123 "This is a bug",
for ``ctx config check`` and every command finding the file), and a NUL in
``offload_dir`` passed ``ctx config check`` as valid, then crashed ``ctx reduce`` with
"embedded null byte" (exit 123). Both now exit 2 with one line naming the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import invoke

DEEP = "x = " + "[" * 5000 + "]" * 5000 + "\n"
NUL = 'offload_dir = "off\\u0000dir"\n'  # TOML's escape: the value holds a NUL


@pytest.fixture
def session() -> Path:
    path = Path("s.jsonl")
    path.write_text('{"role": "user", "content": "hi"}\n')
    return path


def test_a_deeply_nested_array_is_a_usage_error_naming_the_file(session: Path) -> None:
    Path("deep.toml").write_text(DEEP)
    expected = "ctx: error: deep.toml: invalid TOML: arrays or tables nested too deeply to read"
    assert invoke(["config", "check", "deep.toml"], code=2).stderr.startswith(expected)
    assert invoke(["stats", str(session), "-c", "deep.toml"], code=2).stderr.startswith(expected)
    # Found by looking, it is named the same way.
    Path("ctx.toml").write_text(DEEP)
    found = str(Path("ctx.toml").resolve())
    result = invoke(["config", "check"], code=2)
    assert result.stderr.startswith(f"ctx: error: {found}: invalid TOML: arrays or tables")


def test_a_parent_pyproject_nested_too_deeply_is_passed_over_like_invalid_toml(
    session: Path,
) -> None:
    # Not ctx's file to judge: a pyproject.toml ctx cannot read holds no [tool.ctx] for it.
    (Path("pyproject.toml")).write_text("[tool.ctx]\n" + DEEP)
    assert invoke(["stats", str(session), "--json"]).stdout.startswith("{")


def test_a_nul_in_offload_dir_is_a_usage_error_naming_the_key(session: Path) -> None:
    Path("nul.toml").write_text(NUL)
    line = (
        "ctx: error: nul.toml: offload_dir = 'off\\x00dir' is invalid: "
        "a path cannot hold a NUL character (\\0)\n"
    )
    assert invoke(["config", "check", "nul.toml"], code=2).stderr == line
    assert invoke(["reduce", str(session), "-c", "nul.toml", "-o", "out.jsonl"], code=2).stderr == (
        line
    )
    assert not Path("out.jsonl").exists()
