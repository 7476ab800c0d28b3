"""The two consoles: stdout for the payload only, stderr for everything else."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "SECRET_VARS",
    "STDOUT_CHUNK",
    "err_console",
    "error",
    "progress",
    "redact",
    "shown_path",
    "warn",
    "width",
    "write_json",
    "write_stdout",
]


def err_console() -> Any:
    """A Rich console on the current stderr (looked up at call time, so tests capture it)."""
    from rich.console import Console

    # NO_COLOR (no-color.org): Rich alone drops colours but keeps bold and italics;
    # someone who sets it wants plain text. Without a TTY Rich writes no escapes anyway.
    plain = bool(os.environ.get("NO_COLOR"))
    # Off a terminal (CI logs, `make demo` through a pipe) Rich assumes 80 columns and
    # would cut the stats table's headers; COLUMNS still wins when set.
    width = None if sys.stderr.isatty() or os.environ.get("COLUMNS") else 100
    return Console(
        file=sys.stderr,
        highlight=False,
        soft_wrap=False,
        color_system=None if plain else "auto",
        width=width,
    )


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as ctx prints it: the same text wherever the user runs the command.

    Under the working directory, relative to it (``out.jsonl.offload``); under the home
    directory, from ``~`` (``~/.claude/projects/…``); under both, from the nearer of the
    two; else as given. Only what is printed for a person reads so: JSON payloads and the
    hints in a transcript keep absolute paths (a hint is read from wherever the agent runs).
    """
    text = os.fspath(path)
    if not os.path.isabs(text):
        return text  # as the user gave it (or a URL)
    try:
        here = os.getcwd()
    except OSError:  # the working directory was removed
        here = ""
    best: tuple[int, str] | None = None
    for base, prefix in ((here, ""), (os.path.expanduser("~"), "~")):
        if not os.path.isabs(base) or base == os.sep:
            continue
        rel = os.path.relpath(text, base)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            continue
        if prefix:
            rel = prefix if rel == os.curdir else os.path.join(prefix, rel)
        if best is None or len(base) > best[0]:  # the nearer base; the working directory on a tie
            best = (len(base), rel)
    return text if best is None else best[1]


def width() -> int:
    """The columns the tables on stderr fit: COLUMNS, else the terminal's, else 100.

    Off a terminal (CI logs, a pipe) Rich would assume 80 and cut the stats table's
    headers; 100 is what :func:`err_console` gives such a run.
    """
    import shutil

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((100, 24)).columns if sys.stderr.isatty() else 100


SECRET_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def redact(text: str) -> str:
    """Replace any API key from the environment by ``[redacted]``.

    The SDK never puts the key in its messages, but an error body from a proxy or a
    misconfigured endpoint might echo it; nothing ctx prints may carry it.
    """
    for var in SECRET_VARS:
        secret = os.environ.get(var)
        if secret and len(secret) >= 8 and secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def warn(message: str) -> None:
    """Print one warning line to stderr."""
    sys.stderr.write(redact(f"ctx: warning: {message}\n"))


def error(message: str) -> None:
    """Print one error line per message line to stderr."""
    for line in redact(message).splitlines() or [""]:
        sys.stderr.write(f"ctx: error: {line}\n")


def write_json(data: bytes) -> None:
    """Write a JSON report (never a transcript) to stdout, with secrets redacted."""
    write_stdout(redact(data.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass"))


STDOUT_CHUNK = 1 << 16


def write_stdout(data: bytes) -> None:
    """Write the payload to stdout as bytes.

    In pipe-sized pieces: a reader that goes away (``| head -1``) is then noticed at the
    next piece (BrokenPipeError) instead of the rest being written into the void.

    Raises:
        OSError: stdout is closed or cannot take the data (named ``<stdout>``);
            BrokenPipeError when the reader went away.
    """
    if sys.stdout is None:
        raise OSError(errno.EBADF, "stdout is closed", "<stdout>")
    try:
        sys.stdout.flush()
        out = sys.stdout.buffer
        # A write the reader cut short returns a count, not an error: loop, so the
        # rest is written or the broken pipe is raised, never silently dropped.
        view = memoryview(data)
        while view:
            written = out.write(view[:STDOUT_CHUNK])
            if not written:
                raise OSError(errno.EIO, "stdout takes no more data", "<stdout>")
            view = view[written:]
            out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        if exc.filename is None:
            exc.filename = "<stdout>"
        raise


@contextmanager
def progress(
    description: str, *, enabled: bool = True, delay_s: float = 0.5
) -> Iterator[Callable[[int, int], None]]:
    """Yield a ``(done, total)`` callback that draws a progress bar on stderr.

    The bar appears only when stderr is a terminal and the work is still going after
    ``delay_s`` seconds, so quick runs and pipes print nothing extra. It refreshes
    from the callback rather than from a Rich thread, which keeps the process free of
    threads when ctx forks its counting workers.
    """
    if not enabled or not sys.stderr.isatty():
        yield lambda _done, _total: None
        return
    start = time.monotonic()
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        bar = state.get("bar")
        if bar is None:
            if now - start < delay_s or done >= total:
                return
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeRemainingColumn

            bar = Progress(
                f"ctx: {description}",
                BarColumn(),
                TaskProgressColumn(),
                TimeRemainingColumn(),
                console=err_console(),
                transient=True,
                auto_refresh=False,
            )
            bar.start()
            state.update(bar=bar, task=bar.add_task(description, total=total), shown=0.0)
        bar.update(state["task"], completed=done, total=total)
        if now - state["shown"] >= 0.1 or done >= total:
            state["shown"] = now
            bar.refresh()

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()
