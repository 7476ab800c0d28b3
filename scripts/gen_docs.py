"""Rewrite the generated blocks of README.md from the code itself (`make docs`).

A block is everything between ``<!-- [[[ctx:NAME]]] -->`` and ``<!-- [[[end]]] -->``:

- ``stages``: the stage table, from the registry (built-in stages only);
- ``help``: the output of ``ctx --help``;
- ``stats``: the output of a real ``ctx stats session.jsonl`` run on the bundled sample;
- ``plugin``: the example plugin package in tests/plugin_example (which the tests install);
- ``format_plugin``: the example format plugin in tests/plugin_format_example (likewise).

With --check, write nothing and exit 1 with a diff if a block is stale;
tests/test_docs.py runs the same comparison.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SAMPLE = ROOT / "sample_transcripts" / "openai_chat_support.jsonl"
PLUGIN = ROOT / "tests" / "plugin_example"
FORMAT_PLUGIN = ROOT / "tests" / "plugin_format_example"
BLOCK = re.compile(
    r"(?P<open><!-- \[\[\[ctx:(?P<name>[a-z_-]+)\]\]\] -->\n)(?P<body>.*?)(?P<close><!-- \[\[\[end\]\]\] -->)",
    re.DOTALL,
)

# Generated text must not depend on who runs the generator: no plugins, no colour,
# a fixed width, no token cache in the user's home.
DOCS_ENV = {"CTX_NO_PLUGINS": "1", "NO_COLOR": "1", "COLUMNS": "100", "CTX_NO_CACHE": "1"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def stages_block() -> str:
    """The stage table: name, summary, options with their defaults."""
    from pydantic_core import to_jsonable_python

    from ctxcli.stages import registry

    rows = ["| stage | what it does | options (default) |", "|---|---|---|"]
    for spec in sorted(registry().values(), key=lambda s: s.name):
        if spec.package != "ctxcli":
            continue
        options = []
        for name, info in spec.options.model_fields.items():
            if info.is_required():
                shown = "required"
            else:
                default = to_jsonable_python(info.get_default(call_default_factory=True))
                shown = _toml(default)
            options.append(f"`{name}` ({_cell(shown)})")
        rows.append(f"| `{spec.name}` | {_cell(spec.summary)} | {', '.join(options) or '—'} |")
    return "\n".join(rows) + "\n"


def _toml(value: object) -> str:
    if value is None:
        return "unset"
    from ctxcli.pipeline.schema import toml_value

    return toml_value(value)


def help_block() -> str:
    """``ctx --help``, as a terminal 80 columns wide shows it."""
    from typer.testing import CliRunner

    from ctxcli.cli import app

    result = CliRunner().invoke(app, ["--help"], prog_name="ctx", terminal_width=80)
    if result.exit_code != 0:
        raise SystemExit(f"ctx --help failed: {result.output}")
    return f"```text\n$ ctx --help\n{result.stdout.rstrip()}\n```\n"


def stats_block() -> str:
    """A real ``ctx stats session.jsonl`` on the bundled sample, as a user would type it."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(SAMPLE, Path(tmp) / "session.jsonl")
        env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
        env.update(DOCS_ENV)
        done = subprocess.run(
            [sys.executable, "-m", "ctxcli", "stats", "session.jsonl"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if done.returncode != 0 or done.stdout:
        raise SystemExit(f"ctx stats failed ({done.returncode}): {done.stderr}")
    table = "\n".join(line.rstrip() for line in done.stderr.splitlines())
    return f"```console\n$ ctx stats session.jsonl\n{table}\n```\n"


def _package_block(folder: Path, module: str) -> str:
    """An example plugin's two files, verbatim."""
    pyproject = (folder / "pyproject.toml").read_text(encoding="utf-8")
    source = (folder / module).read_text(encoding="utf-8")
    return (
        f"`pyproject.toml`:\n\n```toml\n{pyproject.rstrip()}\n```\n\n"
        f"`{module}`:\n\n```python\n{source.rstrip()}\n```\n"
    )


def plugin_block() -> str:
    """The example stage plugin's two files, verbatim."""
    return _package_block(PLUGIN, "ctx_redact_emails.py")


def format_plugin_block() -> str:
    """The example format plugin's two files, verbatim."""
    return _package_block(FORMAT_PLUGIN, "ctx_chatlog_format.py")


GENERATORS: dict[str, Callable[[], str]] = {
    "stages": stages_block,
    "help": help_block,
    "stats": stats_block,
    "plugin": plugin_block,
    "format_plugin": format_plugin_block,
}


def render(text: str) -> str:
    """``text`` with every generated block rewritten."""
    names = [m["name"] for m in BLOCK.finditer(text)]
    unknown = sorted(set(names) - set(GENERATORS))
    if unknown:
        raise SystemExit(f"README.md: unknown generated block(s): {', '.join(unknown)}")
    bodies = {name: GENERATORS[name]() for name in set(names)}
    return BLOCK.sub(lambda m: m["open"] + bodies[m["name"]] + m["close"], text)


def main() -> int:
    """Rewrite README.md, or with --check report whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is stale")
    args = parser.parse_args()
    os.environ.update(DOCS_ENV)
    current = README.read_text(encoding="utf-8")
    fresh = render(current)
    if fresh == current:
        print("README.md is up to date", file=sys.stderr)
        return 0
    if args.check:
        diff = difflib.unified_diff(
            current.splitlines(True), fresh.splitlines(True), "README.md", "generated"
        )
        sys.stderr.writelines(diff)
        print("README.md is stale; run 'make docs'", file=sys.stderr)
        return 1
    README.write_text(fresh, encoding="utf-8")
    print("wrote README.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
