"""Errors the library raises and the exit codes the CLI maps them to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, stable for CI jobs."""

    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    API_ERROR = 3
    INTERNAL_ERROR = 123
    INTERRUPTED = 130
    BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away


class CtxError(Exception):
    """An error meant for the user: its message is one sentence that says what to do."""

    exit_code: ExitCode = ExitCode.USAGE_ERROR


class ConfigError(CtxError):
    """The configuration file or a command-line override is invalid."""


class TranscriptError(CtxError):
    """The transcript cannot be read: names the file and, when known, the line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class StageError(CtxError):
    """A stage failed for a reason other than "not applicable"."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"stage {stage}: {message}")


class OffloadError(CtxError):
    """The offload directory cannot be written or does not match the transcript."""


class RestoreError(CtxError):
    """A reduced transcript cannot be restored from its offload directory."""


class ClassifierError(CtxError):
    """A remote classifier, summarizer or token counter failed after its retries."""

    exit_code = ExitCode.API_ERROR
