"""The library never pulls in the CLI: typer and rich stay out of a library-only run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.paths import REPO, SAMPLE

CODE = f"""
import sys
from ctxcli import reduce_bytes, load_config
from ctxcli.formats.validate import validate_bytes
data = open({str(SAMPLE)!r}, "rb").read()
out = reduce_bytes(data).output
assert validate_bytes(out) == []
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("typer", "rich", "click")
                or m == "ctxcli.cli")
print(",".join(leaked))
"""


def test_library_does_not_import_the_cli(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


VERSION_CODE = """
import sys
sys.argv = ["ctx", "--version"]
from ctxcli._entry import main
try:
    main()
except SystemExit as exc:  # the CLI exits; still report what it imported
    assert not exc.code, exc.code
heavy = ("anthropic", "pydantic", "typer", "rich", "click", "orjson", "httpx")
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in heavy)), file=sys.stderr)
"""


def test_version_imports_no_heavy_module(tmp_path: Path) -> None:
    from ctxcli._version import __version__

    result = subprocess.run(
        [sys.executable, "-c", VERSION_CODE], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"ctx {__version__}\n"
    assert result.stderr.strip() == ""


STATS_CODE = """
import sys
sys.argv = ["ctx", "stats", sys.argv[1], "--json"]
from ctxcli._entry import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(",".join(sorted(sys.modules)), file=sys.stderr)
"""

# What `ctx stats --json` of one file has no use for: the report page, remote storage,
# dataset rows, the config schema, validation, sessions, the terminal tables, the API
# client. Each is imported by the command that needs it (ctxcli/cli/app.py).
NOT_FOR_STATS = (
    "ctxcli.report",
    "ctxcli.api.remote",
    "ctxcli.datasets.rows",
    "ctxcli.pipeline.schema",
    "ctxcli.formats.validate",
    "ctxcli.sessions",
    "ctxcli.cli.render",
    "rich",
    "anthropic",
    "httpx",
)


def test_stats_json_imports_only_what_it_uses(tmp_path: Path) -> None:
    env = {**os.environ, "CTX_CACHE_DIR": str(tmp_path / "cache"), "CTX_NO_PLUGINS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", STATS_CODE, str(SAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tokens_before"] > 0
    modules = result.stderr.strip().splitlines()[-1].split(",")
    assert "ctxcli.api" in modules  # the check sees the command's imports
    loaded = sorted(
        m for m in modules for top in NOT_FOR_STATS if m == top or m.startswith(top + ".")
    )
    assert loaded == []


LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=env,
        check=False,
    )


def test_layer_contracts_hold() -> None:
    """The import-linter contracts in pyproject.toml (cli > ... > core) are kept."""
    result = _lint_imports(REPO / "src", REPO / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _planted(tmp_path: Path, module: str, code: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on a copy of the package with ``code`` appended to ``module``."""
    import shutil

    shutil.copytree(REPO / "src" / "ctxcli", tmp_path / "src" / "ctxcli")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "src" / "ctxcli" / module
    path.write_text(path.read_text() + code)
    return _lint_imports(tmp_path / "src", tmp_path / "pyproject.toml")


def test_layer_contracts_catch_an_upward_import(tmp_path: Path) -> None:
    """The contracts are not vacuous: a core module importing the pipeline breaks them."""
    result = _planted(tmp_path, "core/hints.py", "\nfrom ctxcli.pipeline import compose  # noqa\n")
    assert result.returncode != 0
    assert "ctxcli.core.hints -> ctxcli.pipeline.compose" in result.stdout


def test_the_cli_contract_catches_the_old_circle_even_inside_a_function(tmp_path: Path) -> None:
    """render sits below messages: an import back up, even one hidden in a function, breaks."""
    code = "\n\ndef _planted() -> None:\n    from ctxcli.cli.messages import warn_all  # noqa\n"
    result = _planted(tmp_path, "cli/render.py", code)
    assert result.returncode != 0
    assert "ctxcli.cli.render -> ctxcli.cli.messages" in result.stdout


def _cli_flags() -> set[str]:
    """Every long option of every ctx command (``--offload-dir``, ``--on-invalid``...)."""
    import typer.main

    from ctxcli.cli import app

    flags: set[str] = set()

    def walk(cmd: Any) -> None:
        for param in cmd.params:
            flags.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return flags - {"--help", "--version"}


def _library_strings() -> list[tuple[str, int, str]]:
    """String literals of every library module (not cli/), docstrings left out."""
    import ast

    found = []
    root = REPO / "src" / "ctxcli"
    for path in sorted(root.rglob("*.py")):
        if "cli" in path.relative_to(root).parts[:1]:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings:
                    found.append((str(path.relative_to(REPO)), node.lineno, node.value))
    return found


def test_library_errors_name_no_cli_flag() -> None:
    """Messages below the CLI never name its flags; the boundary words remedies with them."""
    import re

    flags = _cli_flags()
    assert "--offload-dir" in flags and "--on-invalid" in flags
    pattern = re.compile(
        "|".join(re.escape(f) + r"\b" for f in sorted(flags, key=len, reverse=True))
    )
    offenders = [
        f"{path}:{line}: {text!r}"
        for path, line, text in _library_strings()
        if pattern.search(text)
    ]
    assert offenders == []
