"""Re-runs of a grown file: reduce a transcript that grew by appending, paying for what is new.

This is what the ``incremental`` setting, ``RunOptions.incremental`` and ``ctx reduce
--no-incremental`` switch on and off, and what a format's ``incremental`` flag allows.
The live loop (the Reducer, the proxy: a conversation reduced on every model call) keeps
its decisions in memory instead, with :mod:`ctxcli.pipeline.live_loop`.

A session file grows by appending. When ``ctx reduce IN -o OUT`` finds the offload
directory of its previous run on ``OUT`` and ``IN`` starts with the bytes that run read,
it keeps that run's decisions for a prefix and processes only the rest; the output is
the one a full run would write (tests/pipeline/test_rerun.py checks it on real transcripts cut
at random points).

How much is kept is decided when a run ends, by the stages themselves: each stage that
declares a ``frontier`` (``ctxcli.stages.register``) says how many leading messages hold
decisions no appended message can change (truncation: all of them; clearing: those
before the rounds and results it protects). The kept prefix is the smallest of them,
moved back so that no tool call is kept without its results and no record that lacks
its line end is kept (an append would extend it). The manifest records it
(:func:`kept_record`): where it ends in the input, the roles, tool ids and names of its
messages (no texts), their tokens at every stage and what the format needs of its
records (:meth:`~ctxcli.formats.format.Resumable.skeleton`); where it ends in the output is
read off the restore script (:func:`script_cut`).

The next run (:func:`resume_from`) checks that the input starts with the recorded
input's bytes (its sha256), that the output and the configuration are those of that run,
and then parses only the records after the prefix. The stages see the whole
conversation, the prefix as text-less stand-ins (``Conversation.frozen``), so a stage
can still count results and rounds from the start; the pipeline refuses any change to
them (:class:`~ctxcli.core.errors.PrefixChanged`, and the caller runs in full). The
output is the previous output's bytes for the prefix followed by the new part, and the
restore script the previous script's ops for the prefix followed by the new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson

from ctxcli._version import __version__
from ctxcli.core.errors import OnInvalid, PrefixChanged
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.formats import Document, Format
from ctxcli.formats.lines import Record, parse_lines
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.run import settled_prefix
from ctxcli.pipeline.stats_cache import code_fingerprint

__all__ = [
    "RERUN_VERSION",
    "Kept",
    "Resume",
    "chain_supports",
    "config_digest",
    "kept_record",
    "load_tail",
    "merge_ops",
    "pack_end",
    "pack_skeletons",
    "resume_from",
    "script_cut",
    "unpack_skeletons",
]

RERUN_VERSION = 2
"""2: the skeletons are packed (:func:`pack_skeletons`)."""


@dataclass(frozen=True)
class Kept:
    """The prefix a run keeps for the next one (the manifest's ``rerun`` entry)."""

    messages: int
    """How many leading messages are kept."""
    records: int
    """How many leading records (lines) hold them, passthrough records included."""
    input_bytes: int
    """Where those records end in the input."""
    structure: list[Any]
    """``[role, key, group, [[kind, call_id, name, is_error], ...]]`` per kept message."""
    tokens: list[int]
    """Tokens of the kept messages at each stage's input, then in the output."""
    per_message: list[list[int]]
    """``[input, output]`` tokens of each kept message (a resume's share of them)."""
    skeletons: list[Any] | None = None
    """The format's :meth:`~ctxcli.formats.format.Resumable.skeleton` of each kept record."""


@dataclass(frozen=True)
class Resume:
    """What a re-run starts from: the kept prefix and the previous run's output for it."""

    kept: Kept
    format: str
    """The format the previous run read the transcript as."""
    output: bytes
    """The previous output's bytes for the kept records."""
    script: list[list[Any]]
    """The previous restore script's ops for the kept records."""


def chain_supports(config: Config, fmt: Format) -> bool:
    """True if a run of ``config`` over a transcript of ``fmt`` can keep a prefix."""
    return (
        bool(config.stages)
        and getattr(fmt, "incremental", False)
        and all(sc.stage.frontier is not None for sc in config.stages)
    )


def config_digest(config: Config, fmt: Format, root: str, on_invalid: OnInvalid) -> str:
    """What must be the same for a run to keep another's decisions."""
    described = orjson.dumps(
        {
            "rerun": RERUN_VERSION,
            "version": __version__,
            "format": [fmt.name, type(fmt).__module__],
            "settings": config.settings.model_dump(mode="json"),
            "stages": [
                [
                    sc.use,
                    sc.stage.package,
                    getattr(sc.stage.fn, "__module__", ""),
                    sc.options.model_dump(mode="json"),
                ]
                for sc in config.stages
            ],
            # Hints cite the offload directory by this name.
            "root": root,
            "on_invalid": on_invalid.value,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(code_fingerprint() + described).hexdigest()


def _structure(msg: Message) -> list[Any]:
    return [
        msg.role,
        msg.key,
        msg.group,
        [[b.kind.value, b.call_id, b.name, b.is_error] for b in msg.blocks],
    ]


_KINDS = {kind.value: kind for kind in Kind}


def _stand_in(item: Sequence[Any]) -> Message:
    role, key, group, blocks = item
    kinds = _KINDS
    return Message(
        role,
        tuple([Block(kinds[kind], "", call_id, name, err) for kind, call_id, name, err in blocks]),
        key,
        group,
    )


def kept_record(
    doc: Document,
    conv_in: Conversation,
    frontiers: Sequence[int],
    counts: Sequence[Sequence[int]],
    previous: Kept | None,
    digest: str,
) -> dict[str, Any] | None:
    """The manifest's ``rerun`` entry for a run that just ended, or None if it keeps nothing.

    ``conv_in`` is the conversation the stages got (with the stand-ins of ``previous``,
    if this run kept a prefix), ``frontiers`` each stage's frontier and ``counts`` the
    tokens of every message at each stage's input and in the output.
    """
    if not frontiers:
        return None
    frontier, records = _kept_extent(doc, conv_in, frontiers, previous)
    if frontier <= 0:
        return None
    start = previous.messages if previous is not None else 0
    structure = list(previous.structure) if previous is not None else []
    structure.extend(_structure(m) for m in conv_in.messages[start:frontier])
    tokens = [sum(per[start:frontier]) for per in counts]
    per_message = list(previous.per_message) if previous is not None else []
    per_message.extend(
        [a, b] for a, b in zip(counts[0][start:frontier], counts[-1][start:frontier], strict=True)
    )
    if previous is not None:
        tokens = [a + b for a, b in zip(previous.tokens, tokens, strict=True)]
    # Kept records of this run are placeholders without bytes: count from where they end.
    done = previous.records if previous is not None else 0
    input_bytes = (previous.input_bytes if previous is not None else 0) + sum(
        len(r.raw) for r in doc.records[done:records]
    )
    entry: dict[str, Any] = {
        "v": RERUN_VERSION,
        "config": digest,
        "messages": frontier,
        "records": records,
        "input_bytes": input_bytes,
        "structure": structure,
        "tokens": tokens,
        "per_message": per_message,
    }
    packed = pack_skeletons(_skeletons(doc, done, records, previous))
    if any(row is not None for row in packed["rows"]):
        entry["skeletons"] = packed
    return entry


def _kept_extent(
    doc: Document, conv_in: Conversation, frontiers: Sequence[int], previous: Kept | None
) -> tuple[int, int]:
    """How many leading messages a later run may keep, and how many records hold them."""
    # The kept calls have their results among the kept messages (load_tail checks
    # that no new result answers one): the walk starts after them.
    done_messages = previous.messages if previous is not None else 0
    frontier = settled_prefix(conv_in, frontiers, doc.records, start=done_messages)
    if previous is not None:
        # What was kept stays kept: its decisions are final.
        frontier = max(frontier, previous.messages)
    messages = conv_in.messages
    if frontier <= 0:
        return frontier, 0
    if frontier < len(messages):
        first = messages[frontier].key
        assert first is not None  # stages that declare a frontier create no messages
        return frontier, first
    return frontier, len(doc.records) if doc.records[-1].terminator else len(doc.records) - 1


def _skeletons(doc: Document, done: int, records: int, previous: Kept | None) -> Iterable[Any]:
    """The format's skeleton of every kept record: the previous run's, then this run's."""
    fmt = doc.format
    skeletons: Iterable[Any] = (fmt.skeleton(r.data) for r in doc.records[done:records])
    if previous is not None:
        skeletons = chain(previous.skeletons or [None] * previous.records, skeletons)
    return skeletons


def pack_skeletons(skeletons: Iterable[Any]) -> dict[str, list[Any]]:
    """The manifest's form of the kept records' skeletons: each object as its values.

    ``{"shapes": [[key, ...], ...], "rows": [row, ...]}``: a row is ``null``, ``[shape,
    value, ...]`` for an object (its keys are ``shapes[shape]``) or ``["=", value]`` for
    anything else. A 1 GB Claude Code session keeps 450k records: as objects they were
    86 MB at the run's peak and 72 MB of its manifest. ``skeletons`` is read once, so
    a generator of them is never held whole.
    """
    shapes: dict[tuple[str, ...], int] = {}
    rows: list[Any] = []
    for item in skeletons:
        if item is None:
            rows.append(None)
        elif type(item) is dict and all(type(k) is str for k in item):
            keys = tuple(item)
            shape = shapes.setdefault(keys, len(shapes))
            rows.append([shape, *item.values()])
        else:
            rows.append(["=", item])
    return {"shapes": [list(keys) for keys in shapes], "rows": rows}


def unpack_skeletons(packed: Any) -> list[Any]:
    """The skeletons :func:`pack_skeletons` packed.

    Raises:
        KeyError, TypeError, IndexError, ValueError: ``packed`` is damaged.
    """
    shapes = [tuple(keys) for keys in packed["shapes"]]
    out: list[Any] = []
    for row in packed["rows"]:
        if row is None:
            out.append(None)
        elif row[0] == "=" and len(row) == 2:
            out.append(row[1])
        else:
            shape = row[0]
            if type(shape) is not int or not 0 <= shape < len(shapes):
                raise ValueError(f"a skeleton row names no shape: {row!r}")
            out.append(dict(zip(shapes[shape], row[1:], strict=True)))
    return out


def script_cut(ops: Sequence[Sequence[Any]], records: int) -> tuple[list[list[Any]], int]:
    """Find the ops of ``script`` that rebuild the first ``records`` input units.

    The ops of ``script`` that rebuild the first ``records`` input units, and how many
    output units they cover.

    Ops run in output order: ``c n`` is n units of both, an original (``b``/``p``) one
    input unit, ``s n`` n output units (a changed record's new line follows its
    original; created records follow the record they were made after).
    """
    out: list[list[Any]] = []
    inp = units = 0
    for op in ops:
        kind = op[0]
        if kind == "s":
            out.append(list(op))
            units += op[1]
            continue
        if inp >= records:
            break
        if kind == "c":
            n = min(op[1], records - inp)
            out.append(["c", n])
            inp += n
            units += n
        else:
            out.append(list(op))
            inp += 1
    return out, units


def pack_end(ops: Sequence[Sequence[Any]]) -> int:
    """Where the last pack bytes ``ops`` read end: a re-run copies the pack up to there."""
    end = 0
    for op in ops:
        if op[0] == "b":
            end = max(end, op[1] + op[2])
        elif op[0] == "p":  # a recipe: pack pieces [offset, length] between file texts
            for piece in op[1]:
                if len(piece) == 2 and isinstance(piece[0], int) and isinstance(piece[1], int):
                    end = max(end, piece[0] + piece[1])
    return end


def merge_ops(head: list[list[Any]], tail: Sequence[list[Any]]) -> list[list[Any]]:
    """``head`` then ``tail``, adjacent copy or skip runs joined as one run writes them."""
    merged = [list(op) for op in head]
    for op in tail:
        if merged and op[0] in ("c", "s") and merged[-1][0] == op[0]:
            merged[-1][1] += op[1]
        else:
            merged.append(list(op))
    return merged


def _unit_end(output: bytes, units: int) -> int:
    """Where the first ``units`` lines of ``output`` end."""
    pos = 0
    for _ in range(units):
        nl = output.find(b"\n", pos)
        if nl < 0:
            return len(output)
        pos = nl + 1
    return pos


def resume_from(
    manifest: dict[str, Any],
    raw: Input,
    input_sha: hashlib._Hash,
    output: bytes,
    digest: str,
) -> Resume | None:
    """The prefix a re-run on ``raw`` may keep from the run that wrote ``manifest``, or None.

    ``input_sha`` holds sha256 of ``raw[:manifest's input bytes]`` (the caller hashes
    the input once, on to the end, for the new manifest); ``output`` is what is on disk
    where that run wrote its output.
    """
    entry = manifest.get("rerun")
    if not isinstance(entry, dict) or entry.get("v") != RERUN_VERSION:
        return None
    if entry.get("config") != digest or manifest.get("units") != "lines":
        return None
    old_input, old_output = manifest["input"], manifest["output"]
    if len(raw) < old_input["bytes"] or input_sha.hexdigest() != old_input["sha256"]:
        return None
    if (
        len(output) != old_output["bytes"]
        or hashlib.sha256(output).hexdigest() != old_output["sha256"]
    ):
        return None
    kept = Kept(
        entry["messages"],
        entry["records"],
        entry["input_bytes"],
        entry["structure"],
        entry["tokens"],
        entry["per_message"],
        unpack_skeletons(entry["skeletons"]) if "skeletons" in entry else None,
    )
    if (
        kept.input_bytes > old_input["bytes"]
        or kept.messages != len(kept.structure)
        or kept.messages != len(kept.per_message)
        or (kept.skeletons is not None and len(kept.skeletons) != kept.records)
    ):
        return None
    script, units = script_cut(manifest["script"], kept.records)
    return Resume(kept, manifest["format"], output[: _unit_end(output, units)], script)


def load_tail(raw: Input, path: str, fmt: Format, kept: Kept, on_invalid: OnInvalid) -> Document:
    """The document of ``raw`` with the kept records unparsed and their messages stand-ins."""
    stand_ins = [_stand_in(item) for item in kept.structure]
    skeletons = kept.skeletons or [None] * kept.records
    records = [Record(b"", key + 1, skeletons[key], kept=True) for key in range(kept.records)]
    for msg in stand_ins:
        assert msg.key is not None
        records[msg.key].message = msg
    rest = raw[kept.input_bytes :]
    if rest.strip():
        tail = parse_lines(rest, path, on_invalid=fmt.on_invalid(on_invalid))
    else:  # only blank lines were appended, or nothing
        tail = [Record(unit, 0) for unit in rest.splitlines(keepends=True)]
    for i, rec in enumerate(tail):
        rec.line = kept.records + i + 1
    records.extend(tail)
    doc = fmt.build(raw, path, records)
    conv = doc.conversation
    if any(a is not b for a, b in zip(conv.messages, stand_ins, strict=False)):
        raise PrefixChanged("the kept prefix does not line up with the messages")
    # The stages get this very object: the links worked out below are theirs too.
    conv = Conversation(conv.messages, conv.format, {**conv.meta, "frozen": kept.messages})
    doc.conversation = conv
    for mi in range(kept.messages, len(conv.messages)):
        for bi, block in enumerate(conv.messages[mi].blocks):
            if block.kind is Kind.TOOL_RESULT:
                call = conv.call_of((mi, bi))
                if call is not None and call[0] < kept.messages:
                    # A new result answers a kept call (ids reused): its stages would
                    # read a call whose text the stand-in does not hold.
                    raise PrefixChanged("a new tool result answers a kept call")
    return doc
