"""Docs that cannot rot: generated README blocks, stage docs, the Python example, exit codes."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from ctxcli.core.errors import ExitCode
from ctxcli.stages import StageSpec, registry
from support.paths import REPO, load_script

README = REPO / "README.md"


def _gen_docs() -> Any:
    return load_script("gen_docs")


def _manual() -> str:
    """README.md and the manual's pages whose examples run, as one text."""
    return "\n".join(_gen_docs().read_sources().values())


def _section(title: str) -> str:
    for text in _gen_docs().read_sources().values():
        match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
        if match:
            return match.group(1)
    raise AssertionError(f"README.md and docs/ have no '## {title}' section")


def test_generated_blocks_are_current() -> None:
    """Stage table, `ctx --help` and the plugin examples match the code.

    The output under the `$` lines (`run` blocks) is compared by tests/project/test_readme.py.
    """
    gen = _gen_docs()
    texts = gen.read_sources()
    names = {m["name"] for text in texts.values() for m in gen.BLOCK.finditer(text)} - {gen.RUN}
    assert sorted(names) == sorted(gen.GENERATORS)
    for path, fresh in gen.render_all(texts).items():
        assert fresh == texts[path], f"{path.name} is stale: run 'make docs' and commit it"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a\n<!-- [[[ctx:run]]] -->\n```console\n$ ctx stages\n```\n## Next\n", 2),
        ("<!-- [[[ctx:run]]] -->\nx\n<!-- [[[ctx:help]]] -->\ny\n<!-- [[[end]]] -->\n", 1),
        ("x\n<!-- [[[end]]] -->\n", 2),
    ],
    ids=["never closed", "closed by the next block's end", "an end alone"],
)
def test_a_generated_block_without_its_end_is_refused(text: str, line: int) -> None:
    # Left open, a block would run to the next block's end and rewriting it would drop
    # every section in between (it happened once: four README sections gone).
    with pytest.raises(SystemExit, match=f"README.md:{line}: "):
        _gen_docs().render(text)


# Where a `pip install` names a package: a command, a hint in an error, a docstring.
PIP_INSTALL = re.compile(r"\bpip[3x]? install([^\n`\"#;|&()]*)")
# What a hint may install besides ctx itself: the pip it upgrades, and the third-party
# packages ctx depends on (a hint about one of them names it).
DIST = "ctx-lossless"


def _our_dependencies() -> set[str]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    return {_dist_name(s) for s in specs}


def _dist_name(spec: str) -> str:
    """``'Foo_Bar[x]>=1'`` -> ``foo-bar`` (PEP 503 normalised, extras and version dropped)."""
    name = re.split(r"[\[<>=!~;@ ]", spec.strip("'\""), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _install_hints() -> list[tuple[str, str]]:
    """(file, package) for every package a `pip install` in what users read names."""
    files = [README, REPO / "Makefile", REPO / ".ci" / "run", *REPO.glob("docs/**/*.md")]
    files += [*(REPO / "src").rglob("*.py"), *(REPO / "scripts").glob("*")]
    hints = []
    for path in files:
        for match in PIP_INSTALL.finditer(path.read_text(encoding="utf-8")):
            for word in match[1].split():
                word = word.lstrip("'\"").rstrip("'\".,:")
                if not word or word.startswith(("-", "$", "/", ".")):
                    continue  # a flag, or a local path (a checkout, a built wheel)
                hints.append((str(path.relative_to(REPO)), word))
    return hints


def test_every_install_hint_names_our_distribution() -> None:
    """`ctxcli` on PyPI is someone else's: no hint may install it (or any other stranger)."""
    allowed = {DIST, "pip"} | _our_dependencies()
    hints = _install_hints()
    assert any(name == f"{DIST}[langchain]" for _, name in hints)  # the scan sees the hints
    strangers = [(f, n) for f, n in hints if _dist_name(n) not in allowed]
    assert strangers == []
    for example in ("plugin_example", "plugin_format_example"):
        pyproject = (REPO / "tests" / example / "pyproject.toml").read_text(encoding="utf-8")
        assert f'dependencies = ["{DIST}"]' in pyproject


def test_the_installed_distribution_is_ctx_lossless() -> None:
    """Metadata lookups by name find ctx under its own name, at the version ctx prints."""
    from importlib.metadata import version

    from ctxcli import __version__

    assert version(DIST) == __version__


def test_stage_table_lists_every_builtin_stage() -> None:
    table = _section("Stages")
    builtins = [s for s in registry().values() if s.package == "ctxcli"]
    assert builtins
    for spec in builtins:
        assert f"| `{spec.name}` | {spec.summary.replace('|', chr(92) + '|')} |" in table


def _option_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The model and every model nested in its fields (per-tool override tables)."""
    found = [model]
    for info in model.model_fields.values():
        stack: list[Any] = [info.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel) and tp not in found:
                found += _option_models(tp)
            stack.extend(getattr(tp, "__args__", ()))
    return found


@pytest.mark.parametrize("spec", list(registry().values()), ids=lambda s: s.name)
def test_every_stage_is_documented(spec: StageSpec) -> None:
    doc = spec.doc
    assert spec.summary and spec.summary.endswith("."), "first docstring line: one sentence"
    for heading in ("Applies to:", "Effect:", "Interacts with:"):
        assert re.search(rf"^{heading} \S", doc, re.M), f"{spec.name}: no '{heading}' section"
    for model in _option_models(spec.options):
        for name, info in model.model_fields.items():
            assert info.description, f"{spec.name}: {model.__name__}.{name} has no description"


def test_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's example, executed as written (the conftest chdirs into a tmp dir)."""
    blocks = re.findall(r"```python\n(.*?)```", _section("Using ctx from Python"), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "__readme__"})
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"[\d,]+ -> [\d,]+ tokens", lines[0])
    assert lines[1] == "1 text offloaded"
    before, after = (int(x) for x in lines[2].split(" -> "))
    assert after < before
    assert Path("reduced.jsonl.offload/manifest.json").is_file()


def test_exit_code_table_matches_the_enum() -> None:
    rows = re.findall(r"^\| (\d+) \| ", _section("Exit codes"), re.M)
    assert sorted(int(r) for r in rows) == sorted(int(c) for c in ExitCode)


def test_every_command_is_in_the_readme() -> None:
    import typer.main

    from ctxcli.cli import app

    text = _manual()
    group: Any = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert f"ctx {name}" in text, f"README.md never shows 'ctx {name}'"
        for sub in getattr(command, "commands", {}):
            assert f"ctx {name} {sub}" in text, f"README.md never shows 'ctx {name} {sub}'"


def test_every_command_has_help_ending_with_an_example() -> None:
    import typer.main

    from ctxcli.cli import app

    def leaves(command: Any, path: str) -> list[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs is None:
            return [(path, command)]
        return [leaf for name, sub in subs.items() for leaf in leaves(sub, f"{path} {name}")]

    runner = CliRunner()
    for path, command in leaves(typer.main.get_command(app), "ctx"):
        text = command.help or ""
        assert text.splitlines()[0].endswith("."), f"{path}: first help line is not a sentence"
        example = re.search(r"^Example:\n\n(?:\x08\n)?((?: +ctx .*\n?)+)", text, re.M)
        assert example, f"{path}: help has no Example"
        # What -h shows on an 80-column terminal: each example stays one line to copy.
        shown = runner.invoke(app, [*path.split()[1:], "-h"], terminal_width=80).stdout
        shown_lines = {line.strip() for line in shown.splitlines()}
        for line in example.group(1).splitlines():
            assert line.strip() in shown_lines, (
                f"{path}: -h rewraps {line.strip()!r}; put a \\b line before it"
            )


def test_plugin_section_names_the_real_entry_point_group() -> None:
    from ctxcli.stages import PLUGIN_GROUP

    section = _section("Writing a stage plugin")
    assert f'[project.entry-points."{PLUGIN_GROUP}"]' in section
    assert "CTX_NO_PLUGINS=1" in section


@pytest.mark.slow
def test_python_example_type_checks_strictly(tmp_path: Path) -> None:
    """The public API is typed: mypy --strict accepts the README example as a user's code.

    One misuse is appended, so the run also proves mypy sees real types, not Any.
    """
    import subprocess

    blocks = re.findall(r"```python\n(.*?)```", _section("Using ctx from Python"), re.S)
    example = tmp_path / "example.py"
    misuse = "cell, blobs = reduce_row(records)\n"
    example.write_text(blocks[0] + misuse, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", example.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = len(blocks[0].splitlines()) + 1
    errors = [x for x in done.stdout.splitlines() if ": error: " in x]
    assert len(errors) == 1, done.stdout + done.stderr
    assert errors[0].startswith(f"example.py:{line}: error: ")
    assert '"ReducedRow" object is not iterable' in errors[0]
