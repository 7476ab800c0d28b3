"""``ctx validate``: the transcript rules of the diagnose engine, on any format.

Every line is JSON, every tool call has its result and every result its call
(:data:`~ctxcli.formats.diagnose.TRANSCRIPT_RULES`). What breaks resuming a client's
session beyond that (a broken ``parentUuid`` chain, empty text blocks...) is for
``ctx doctor``, which runs these rules and the client's.
"""

from __future__ import annotations

from dataclasses import replace

from ctxcli.core.errors import VALIDATE_ON_INVALID, OnInvalid
from ctxcli.core.io import Input
from ctxcli.formats import Document, load, split_collection
from ctxcli.formats.clients import ClientFile
from ctxcli.formats.diagnose import TRANSCRIPT_RULES, Diagnosis, Problem, diagnose

__all__ = ["Problem", "check_document", "validate_bytes", "validate_transcript"]


def check_document(doc: Document) -> list[Problem]:
    """The problems the transcript rules find in a loaded transcript."""
    return diagnose(ClientFile.of(doc)).problems


def validate_transcript(
    raw: Input,
    path: str = "<stdin>",
    *,
    format: str = "auto",
    on_invalid: OnInvalid = VALIDATE_ON_INVALID,
) -> Diagnosis:
    """Load a transcript and run the transcript rules over it.

    Unlike reducing, checking stops at a line that is not JSON in every format by
    default: reporting it is the point of a check; kept (``on_invalid``), the line is a
    problem. In a file of many trajectories (tau-bench runs, OpenHands output, dataset
    rows) each is checked on its own; a problem names its trajectory and message.

    Raises:
        TranscriptError: the file cannot be read as a transcript (a line that is not
            JSON, unless kept).
    """
    on_invalid = OnInvalid.of(on_invalid)
    names = tuple(rule.name for rule in TRANSCRIPT_RULES)
    split = split_collection(raw, path, format=format)
    if split is None:
        return diagnose(ClientFile.of(load(raw, path, format=format, on_invalid=on_invalid)))
    problems: list[Problem] = []
    for part in split.parts:
        for p in check_document(load(part.raw, part.name, on_invalid=on_invalid)):
            message = f"{part.label}, message {p.line}: {p.message}"
            problems.append(replace(p, line=None, message=message))
    return Diagnosis(path, split.format, names, problems)


def validate_bytes(
    raw: Input,
    path: str = "<stdin>",
    *,
    format: str = "auto",
    on_invalid: OnInvalid = VALIDATE_ON_INVALID,
) -> list[Problem]:
    """Return the problems :func:`validate_transcript` finds (none: the file is valid)."""
    return validate_transcript(raw, path, format=format, on_invalid=on_invalid).problems
