r"""Checks for stage and format plugin authors: ctx's guarantees as test assertions.

Use them from a plugin's own tests (pytest or plain ``assert``): each helper raises
``AssertionError`` with a one-line reason when the plugin breaks a guarantee.

- :func:`run_stage` calls one stage on a conversation, with the token counter and the
  in-memory offload store the pipeline would give it, and returns what the stage
  returned plus every text it offloaded.
- :func:`assert_stage_roundtrip` reduces a transcript with one stage, as ``ctx reduce``
  does, and asserts that ``ctx restore`` gives the input back byte for byte, that
  reducing the output again changes nothing, and that no tool call loses its result.
- :func:`assert_roundtrip` is the same for any configuration (a format plugin's test
  runs it on its transcripts); :func:`assert_format_identity` asserts a format loads and
  dumps an untouched transcript to the same bytes; :func:`assert_dump_restores` writes
  an edited conversation through a format and restores it; :func:`assert_golden`
  compares output with a checked-in file.

Example::

    >>> from ctxcli.testing import assert_stage_roundtrip
    >>> line = b'{"role": "user", "content": "hi"}\n'
    >>> assert_stage_roundtrip("truncate_tool_output", line) == line
    True

Nothing in ``ctxcli`` imports this module (an import contract says so).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli.api import Destination, reduce, restore_file
from ctxcli.core.errors import OnInvalid, RestoreError
from ctxcli.core.protocols import sha256
from ctxcli.formats import Document, load
from ctxcli.formats.validate import check_document, validate_bytes
from ctxcli.pipeline.config import Config, build_config
from ctxcli.pipeline.context import stage_context
from ctxcli.pipeline.results import Report
from ctxcli.services.tokens.by_name import get_counter
from ctxcli.stages import Conversation, StageResult, TokenLedger, get_stage
from ctxcli.store.disk import OffloadStore
from ctxcli.store.manifest import Header, InputSide, Side
from ctxcli.store.memory import BlobStore
from ctxcli.store.naming import Preview
from ctxcli.store.restore import restore_bytes

__all__ = [
    "StageRun",
    "assert_dump_restores",
    "assert_format_identity",
    "assert_golden",
    "assert_roundtrip",
    "assert_stage_roundtrip",
    "run_stage",
]


@dataclass(frozen=True)
class StageRun(StageResult):
    """What :func:`run_stage` returns: the stage's result, plus what it offloaded.

    Attributes:
        offloaded: every text the stage put in the offload store, by its path under
            the offload root (``trunc/call_1``; its hint cites
            ``ctx-offload/trunc/call_1``).
    """

    offloaded: dict[str, str] = field(default_factory=dict)


def run_stage(
    stage: str,
    conv: Conversation,
    /,
    *,
    tokenizer: str = "approx",
    offload_root: str = "ctx-offload",
    **options: Any,
) -> StageRun:
    r"""Call the registered stage ``stage`` on ``conv`` with ``options``, in memory.

    The options are validated by the stage's options model, as ``ctx.toml`` would be;
    the stage gets a :class:`~ctxcli.stages.StageContext` with the ``tokenizer``
    counter and an in-memory offload store whose hints cite paths under
    ``offload_root``. Nothing is written anywhere.

    Example::

        >>> from ctxcli.formats import load
        >>> conv = load(b'{"role": "user", "content": "hi"}\n', "t").conversation
        >>> run_stage("truncate_tool_output", conv, max_chars=500).conversation == conv
        True
    """
    spec = get_stage(stage)
    store = BlobStore(offload_root, cite="name")
    # The context a file's run builds, but for the answer cache: nothing is written.
    ctx = stage_context(TokenLedger(get_counter(tokenizer)), store, cache=False)
    result = spec.fn(conv, spec.options(**options), ctx)
    return StageRun(
        result.conversation,
        result.counters,
        result.notes,
        result.fallbacks,
        offloaded=store.texts(),
    )


def assert_stage_roundtrip(
    stage: str, transcript: bytes | Path, /, *, workdir: Path | None = None, **options: Any
) -> bytes:
    """:func:`assert_roundtrip` of ``transcript`` with the one stage ``stage``."""
    config = {"stages": [{"use": stage, **options}]}
    return assert_roundtrip(transcript, config, workdir=workdir)


def assert_roundtrip(
    transcript: bytes | Path,
    config: Config | Mapping[str, Any] | None = None,
    *,
    format: str | None = None,
    workdir: Path | None = None,
) -> bytes:
    """Reduce ``transcript`` as ``ctx reduce`` does and assert ctx's guarantees.

    ``config`` is a :class:`~ctxcli.pipeline.config.Config`, a mapping shaped like
    ``ctx.toml``, or None (the defaults). The files go to ``workdir``, else to a
    temporary directory. Asserted: the transcript is read as ``format`` (when given);
    restoring the output gives the input byte for byte; reducing the output again gives
    the same bytes; and the output has no validation problem (a tool call without its
    result, or one the other way round) that the input did not have.

    Returns:
        The reduced bytes.
    """
    raw = transcript.read_bytes() if isinstance(transcript, Path) else transcript
    if not isinstance(config, Config):
        config = build_config(dict(config or {}), "ctxcli.testing")
    with _workdir(workdir) as work:
        src = work / "transcript"
        src.write_bytes(raw)
        report, out = _reduce(src, work / "reduced", work / "off", config)
        if format is not None:
            assert report.format == format, f"read as {report.format!r}, not {format!r}"
            manifest = json.loads((work / "off" / "manifest.json").read_bytes())
            assert manifest["format"] == format, f"the manifest says {manifest['format']!r}"
        _assert_same(_restored(restore_file, work / "reduced", offload_dir=work / "off"), raw)
        _, again = _reduce(work / "reduced", work / "again", work / "off2", config)
        _assert_same(again, out, "reduced twice")
    new = _problems(out) - _problems(raw)
    assert not new, f"the output has problems the input has not: {sorted(new, key=str)}"
    return out


def assert_format_identity(raw: bytes, format: str | None = None) -> Document:
    """Loading ``raw`` and dumping it with no stage gives it back, copied as one piece.

    ``format`` forces a format (else it is detected). Returns the loaded document.
    """
    doc = load(raw, "transcript", format=format or "auto")
    out, script = doc.format.dump(doc, doc.conversation, Preview("offload"))
    _assert_same(out, raw, f"dumped by {doc.format.name}")
    copied = all(op[0] == "c" for op in script.ops)
    assert copied, f"{doc.format.name}: an untouched transcript must restore by copying"
    return doc


def assert_dump_restores(doc: Document, conv: Conversation, workdir: Path | None = None) -> bytes:
    """Write ``conv`` (an edit of ``doc``'s conversation) through ``doc``'s format.

    The removed units go to a real offload store in ``workdir`` (else a temporary
    directory). Asserted: restoring the output gives ``doc``'s bytes, and the output
    loads again as the same format with no problem. Returns the output.
    """
    raw = bytes(doc.raw)
    with _workdir(workdir) as work:
        root = work / "edit.offload"
        store = OffloadStore(root, str(root))
        out, script = doc.format.dump(doc, conv, store)
        header = Header.new(
            format=doc.format.name,
            units=doc.format.units,
            input=InputSide(name="transcript", sha256=sha256(raw), bytes=len(raw)),
            output=Side(sha256=sha256(out), bytes=len(out)),
        )
        store.commit(header, script.ops)
        _assert_same(_restored(restore_bytes, out, root), raw)
    reloaded = load(out, "edited", format=doc.format.name)
    problems = check_document(reloaded)
    assert problems == [], f"the edited output does not load cleanly: {problems}"
    return out


def assert_golden(actual: bytes, golden: Path, *, update: bool = False) -> None:
    """``actual`` equals the checked-in file ``golden``; ``update`` rewrites it instead.

    A missing golden file fails (run once with ``update=True`` and review the file).
    """
    if update:
        golden.write_bytes(actual)
        return
    assert golden.is_file(), f"{golden} is missing; write it with update=True and review it"
    _assert_same(actual, golden.read_bytes(), f"the output, against {golden.name}")


def _reduce(src: Path, out: Path, offload: Path, config: Config) -> tuple[Report, bytes]:
    """Run ``ctx reduce`` with hints citing ``ctx-offload`` wherever the files are.

    ``ctx reduce SRC -o OUT --offload-dir OFFLOAD``, its hints citing ``ctx-offload``
    wherever the files are, so that the output is the same in every run.
    """
    dest = Destination(str(out), str(offload), cite_as="ctx-offload")
    done = reduce(src, dest, config=config)
    return done.report, done.output


@contextmanager
def _workdir(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="ctx-testing-") as tmp:
        yield Path(tmp)


def _restored(restore: Callable[..., bytes], *args: Any, **kwargs: Any) -> bytes:
    """What ``restore`` rebuilds; its refusal (a hash that does not match) fails the test."""
    try:
        return restore(*args, **kwargs)
    except RestoreError as exc:
        raise AssertionError(f"restored: {exc}") from None


def _assert_same(got: bytes, want: bytes, what: str = "restored") -> None:
    """One line saying where ``got`` first differs from ``want``."""
    if got == want:
        return
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    where = f"first difference at byte {at}" if at is not None else "one is a prefix"
    raise AssertionError(f"{what}: {len(got)} bytes, expected {len(want)}; {where}")


def _problems(raw: bytes) -> set[tuple[str, str | None]]:
    """The validation problems of ``raw`` as (kind, call id) pairs."""
    found = validate_bytes(raw, "transcript", on_invalid=OnInvalid.AUTO)
    return {(p.kind, p.call_id) for p in found}
