"""Errors the library raises and the exit codes the CLI maps them to."""

from __future__ import annotations

from enum import Enum, IntEnum, StrEnum

__all__ = [
    "ClassifierError",
    "ConfigError",
    "CtxError",
    "ExitCode",
    "OffloadError",
    "OnInvalid",
    "PrefixChanged",
    "Remedy",
    "RestoreError",
    "StageError",
    "TranscriptError",
]


class ExitCode(IntEnum):
    """Process exit codes, stable for CI jobs."""

    OK = 0
    CHECK_FAILED = 1
    USAGE_ERROR = 2
    API_ERROR = 3
    INTERNAL_ERROR = 123
    INTERRUPTED = 130
    BROKEN_PIPE = 141
    """128 + SIGPIPE: the reader of stdout went away (``| head``); nothing is printed."""


class Remedy(Enum):
    """What the user can do about an error, in the library's own words.

    The library never names a command-line flag: an error carries a remedy, and the CLI's
    error boundary words it with the flags (``ctxcli.cli.boundary``), while a Python
    caller reads the neutral wording below.
    """

    OTHER_OFFLOAD_DIR = "choose another offload directory, or allow replacing it (force)"
    NAME_OFFLOAD_DIR = "name the offload directory the reduction wrote"
    KEEP_INVALID = "fix the line, or keep invalid lines as they are (on_invalid='keep')"
    NAME_FORMAT = "name the format explicitly (format=...)"
    CHECK_FORMAT = "check the format you named, or let it be detected"
    OUTPUT_DIRECTORY = "with several inputs the output must be a directory"
    FORCE_IN_USE = "quit its client first, or force the change (force=True) if it is not running"
    ALLOW_EMPTY = (
        "name a file or a directory that holds some, or allow an empty input (allow_empty)"
    )
    PICK_TRAJECTORY = "pick one by its number or id (trajectory=...)"
    NAME_CONFIG = "if you trust the file, name it (load_config(path)) to use it as it is"


class CtxError(Exception):
    """An error meant for the user: its message is one sentence that says what to do.

    ``remedy``, when given, is appended to the message (``problem; remedy``); the CLI
    replaces it by the same advice in terms of its flags.
    """

    exit_code: ExitCode = ExitCode.USAGE_ERROR

    def __init__(self, message: str, *, remedy: Remedy | None = None) -> None:
        self.problem = message
        self.remedy = remedy
        super().__init__(f"{message}; {remedy.value}." if remedy is not None else message)


class ConfigError(CtxError):
    """The configuration file or a command-line override is invalid."""


class OnInvalid(StrEnum):
    """What a line that is not JSON does.

    ``ERROR`` stops with an error naming the line; ``KEEP`` passes the line through
    unchanged with a warning naming file:line; ``AUTO`` keeps it for the formats whose
    own client reads past such a line (Claude Code, Codex) and stops for the others.

    The default of each command, stated here once (every library function and every
    command-line default takes it from these two constants):

    - ``reduce``, ``stats``, ``report``, their batches and dataset rows:
      :data:`DEFAULT_ON_INVALID` (``AUTO``). ``stats`` and ``report`` preview what
      ``reduce`` does, so they read a transcript as it does.
    - ``validate``: :data:`VALIDATE_ON_INVALID` (``ERROR``). Strict by design: it says
      whether a transcript is well formed, and a line that is not JSON is a finding
      (pass ``KEEP`` to look past it for the other checks).
    """

    AUTO = "auto"
    ERROR = "error"
    KEEP = "keep"

    @classmethod
    def of(cls, value: OnInvalid | str) -> OnInvalid:
        """``value`` as a member: what a public function does once with its argument.

        Raises:
            ConfigError: ``value`` names none of the members.
        """
        try:
            return cls(value)
        except ValueError:
            *rest, last = [repr(m.value) for m in cls]
            raise ConfigError(
                f"on_invalid {value!r} is invalid: use {', '.join(rest)} or {last}."
            ) from None


DEFAULT_ON_INVALID = OnInvalid.AUTO
"""``on_invalid`` of reduce, stats, report, batches and dataset rows (see :class:`OnInvalid`)."""

VALIDATE_ON_INVALID = OnInvalid.ERROR
"""``on_invalid`` of validate: strict by design (see :class:`OnInvalid`)."""


class TranscriptError(CtxError):
    """The transcript cannot be read: names the file and, when known, the line."""

    def __init__(
        self, path: str, line: int | None, message: str, *, remedy: Remedy | None = None
    ) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}", remedy=remedy)


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


class PrefixChanged(Exception):
    """An incremental re-run cannot keep its prefix (a stage or the format touched it).

    Not a user error: the caller runs in full instead, so it never reaches the CLI.
    """
