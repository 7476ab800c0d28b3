"""Rewrite the generated blocks of README.md and the manual's pages from the code (`make docs`).

The README and the pages of :data:`PAGES` are one text for this script: their ``$``
lines run in that order, in one shell (a page goes on from where the one before it left).

A block is everything between ``<!-- [[[ctx:NAME]]] -->`` and ``<!-- [[[end]]] -->``:

- ``stages``: the stage table, from the registry (built-in stages only);
- ``help``: the output of ``ctx --help``;
- ``plugin``: the example plugin package in tests/plugin_example (which the tests install);
- ``format_plugin``: the example format plugin in tests/plugin_format_example (likewise);
- ``plugin_tests``: the example stage plugin's own tests (``ctxcli.testing``), verbatim;
- ``run``: a console block whose ``$`` lines keep their text and get, below each, what
  the command printed (stdout and stderr) when every ``$`` line of the README ran in order
  in a scratch checkout (see :func:`run_readme`).

With --check, write nothing and exit 1 with a diff if a block is stale. tests/project/test_docs.py
compares the fast blocks; tests/project/test_readme.py runs the README and compares the ``run`` ones.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = (
    "configuration.md",
    "resume.md",
    "sessions.md",
    "summarize-and-report.md",
    "live.md",
    "cost.md",
    "guarantees.md",
    "large.md",
    "python.md",
    "plugins.md",
    "development.md",
    "hooks.md",
)
"""The manual's pages whose console examples run after the README's, in this order."""
SOURCES = (README, *(ROOT / "docs" / page for page in PAGES))
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


def plugin_tests_block() -> str:
    """The example stage plugin's tests, verbatim (the suite runs them)."""
    source = (PLUGIN / "test_redact_emails.py").read_text(encoding="utf-8")
    return f"`test_redact_emails.py`:\n\n```python\n{source.rstrip()}\n```\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "stages": stages_block,
    "help": help_block,
    "plugin": plugin_block,
    "format_plugin": format_plugin_block,
    "plugin_tests": plugin_tests_block,
}


RUN = "run"
"""The block name of a console block whose commands' output is generated."""
CONSOLE = re.compile(
    r"(<!-- readme-test: skip (?P<skip>[^>]*)-->\s*\n)?```console\n(?P<body>.*?)```", re.S
)
EXPECT = re.compile(r"#\s*exit (\d+)\b")


@dataclass(frozen=True)
class Command:
    """A ``$`` line of the README: the command as written, its exit code, where it shows."""

    line: str
    code: int
    shown: bool


def readme_commands(text: str) -> tuple[list[Command], list[str]]:
    """The ``$`` commands to run, in order, and the reasons of the blocks that are skipped.

    A trailing ``# exit N`` says the command is expected to fail with N; a block after
    ``<!-- readme-test: skip REASON -->`` is not run. A command inside a ``run`` block
    shows what it printed.
    """
    runs = [m.span() for m in BLOCK.finditer(text) if m["name"] == RUN]
    commands: list[Command] = []
    skipped: list[str] = []
    for match in CONSOLE.finditer(text):
        if match["skip"]:
            skipped.append(match["skip"].strip())
            continue
        shown = any(a <= match.start() < b for a, b in runs)
        for line in match["body"].splitlines():
            if line.startswith("$ "):
                expected = EXPECT.search(line)
                commands.append(Command(line[2:], int(expected[1]) if expected else 0, shown))
    return commands, skipped


def _script(commands: list[Command], out: Path) -> str:
    """Bash that runs ``commands`` in one shell (state carries over, as for a reader)."""
    lines = ["set -u", 'fail() { echo "README command failed ($1, wanted $2): $3" >&2; exit 97; }']
    for n, cmd in enumerate(commands):
        quoted = cmd.line.replace("'", "'\\''")
        # The newline before `}` ends a trailing `# comment` of the command.
        lines.append(f"{{ {cmd.line}\n}} >'{out}/{n}.out' 2>&1")
        lines.append("rc=$?")
        lines.append(f"[ $rc -eq {cmd.code} ] || fail $rc {cmd.code} '{quoted}'")
    return "\n".join(lines) + "\necho README-OK\n"


SCRATCH = Path("/tmp/ctx-readme")
"""Where the README runs. What ctx prints names paths relative to the working directory
(or from ``~``), but the hints it writes into a transcript cite absolute paths, and how
many tokens a path takes depends on its characters, not only its length: the token
counts the README shows hold for this path and those that tokenize as it does (a lock
keeps two runs from sharing it)."""


@contextmanager
def scratch_checkout(root: Path = SCRATCH) -> Iterator[Path]:
    """A checkout at ``root`` to run the README in, with its own HOME beside it."""
    import fcntl

    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(root, ignore_errors=True)
        try:
            work = root / "checkout"
            work.mkdir(parents=True)
            (root / "home").mkdir()
            for name in ("sample_transcripts", "docs", "tests", "pyproject.toml", "README.md"):
                (work / name).symlink_to(ROOT / name)
            (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
            yield work
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _env(root: Path) -> dict[str, str]:
    """The environment of a reader with a fresh HOME, no plugins and no colour."""
    drop = ("CTX_", "XDG_", "CLAUDE_", "CODEX_", "ANTHROPIC_", "OPENAI_", "FORCE_COLOR", "LC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(DOCS_ENV)
    del env["CTX_NO_CACHE"]  # as a reader runs it
    env.update(HOME=str(root / "home"), TMPDIR=str(root), LC_ALL="C.UTF-8", TZ="UTC")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def run_readme(text: str, root: Path = SCRATCH) -> list[str]:
    """Run every ``$`` line of ``text`` in order, in a checkout under ``root``; what each printed.

    The text is what the commands printed, less blanks at the ends of lines: no path is
    rewritten, so it is what a reader sees in any directory (ctx prints paths relative).
    Raises SystemExit naming the command that did not exit as the README says.
    """
    commands, _ = readme_commands(text)
    with scratch_checkout(root) as work:
        out = work.parent / "out"
        out.mkdir()
        done = subprocess.run(
            ["bash", "-c", _script(commands, out)],
            cwd=work,
            env=_env(work.parent),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0 or not done.stdout.endswith("README-OK\n"):
            raise SystemExit(done.stderr[-3000:] or f"README script exit {done.returncode}")
        return [_shown(out / f"{n}.out") for n in range(len(commands))]


def _shown(printed: Path) -> str:
    text = printed.read_text(encoding="utf-8", errors="replace")
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def render_runs(text: str, outputs: list[str]) -> str:
    """``text`` with each ``run`` block's commands followed by what they printed."""
    commands, _ = readme_commands(text)
    printed = iter(outputs)
    by_line = iter(commands)

    def block(match: re.Match[str]) -> str:
        if match["name"] != RUN:
            return match[0]
        body: list[str] = []
        for line in match["body"].splitlines():
            if not line.startswith("$ "):
                continue
            cmd = next(by_line)
            while not cmd.shown:  # commands of the blocks before this one
                next(printed)
                cmd = next(by_line)
            body.append(line)
            shown = next(printed)
            if shown:
                body.append(shown)
        return match["open"] + "```console\n" + "\n".join(body) + "\n```\n" + match["close"]

    return BLOCK.sub(block, text)


OPEN = re.compile(r"<!-- \[\[\[ctx:[a-z_-]+\]\]\] -->")
CLOSE = "<!-- [[[end]]] -->"


def check_markers(text: str) -> None:
    """Every opening marker has its own end before the next one opens.

    A block left open would run to the next block's end, and rewriting it would drop
    every section in between.
    """
    depth, line = 0, 0
    for n, row in enumerate(text.splitlines(), 1):
        if OPEN.search(row):
            if depth:
                raise SystemExit(f"README.md:{line}: generated block has no {CLOSE}; add one")
            depth, line = 1, n
        elif CLOSE in row:
            if not depth:
                raise SystemExit(f"README.md:{n}: {CLOSE} closes no generated block")
            depth = 0
    if depth:
        raise SystemExit(f"README.md:{line}: generated block has no {CLOSE}; add one")


def render(text: str, *, run: bool = False) -> str:
    """``text`` with every generated block rewritten (``run`` blocks only when ``run``)."""
    check_markers(text)
    names = [m["name"] for m in BLOCK.finditer(text)]
    unknown = sorted(set(names) - set(GENERATORS) - {RUN})
    if unknown:
        raise SystemExit(f"README.md: unknown generated block(s): {', '.join(unknown)}")
    bodies = {name: GENERATORS[name]() for name in set(names) - {RUN}}
    fresh = BLOCK.sub(
        lambda m: m[0] if m["name"] == RUN else m["open"] + bodies[m["name"]] + m["close"], text
    )
    return render_runs(fresh, run_readme(fresh)) if run else fresh


def render_all(
    texts: dict[Path, str], *, run: bool = False, root: Path = SCRATCH
) -> dict[Path, str]:
    """Every source with its generated blocks rewritten; with ``run``, its ``$`` lines run.

    The sources' commands run as one script (in a checkout under ``root``), in the order
    of ``texts``; each source then gets the outputs of its own commands.
    """
    fresh = {path: render(text) for path, text in texts.items()}
    if not run:
        return fresh
    outputs = run_readme("\n".join(fresh.values()), root)
    done: dict[Path, str] = {}
    start = 0
    for path, text in fresh.items():
        count = len(readme_commands(text)[0])
        done[path] = render_runs(text, outputs[start : start + count])
        start += count
    return done


def read_sources() -> dict[Path, str]:
    """README.md and the pages of :data:`PAGES`, in order."""
    return {path: path.read_text(encoding="utf-8") for path in SOURCES}


def main() -> int:
    """Rewrite README.md and the pages, or with --check report whether they are current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument(
        "--no-run", action="store_true", help="leave the run blocks (the commands are not run)"
    )
    args = parser.parse_args()
    os.environ.update(DOCS_ENV)
    current = read_sources()
    fresh = render_all(current, run=not args.no_run)
    stale = [path for path in current if fresh[path] != current[path]]
    if not stale:
        print("README.md and the pages are up to date", file=sys.stderr)
        return 0
    for path in stale:
        name = str(path.relative_to(ROOT))
        if args.check:
            diff = difflib.unified_diff(
                current[path].splitlines(True), fresh[path].splitlines(True), name, "generated"
            )
            sys.stderr.writelines(diff)
            print(f"{name} is stale; run 'make docs'", file=sys.stderr)
        else:
            path.write_text(fresh[path], encoding="utf-8")
            print(f"wrote {name}", file=sys.stderr)
    return 1 if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
