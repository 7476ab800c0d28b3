"""Stage prune_sidecars: drop the copies of tool output a session file keeps for its UI."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from pydantic import Field, field_validator

from ctxcli.core.model import Conversation, RecordEdits, SourceRecord, hydrate, read_text
from ctxcli.stages._validity import matches, unless_worse
from ctxcli.stages.base import StageContext, StageOptions, StageResult, register

__all__ = [
    "MESSAGE_TYPES",
    "PERSISTED",
    "PruneSidecarsOptions",
    "prune_sidecars",
]

# Record types that hold model-visible messages: never dropped as a sidecar.
MESSAGE_TYPES = ("user", "assistant")
PERSISTED = "<persisted-output>"


class PruneSidecarsOptions(StageOptions):
    """Options of prune_sidecars."""

    fields: list[str] = Field(
        default_factory=lambda: ["toolUseResult"],
        description="Top-level fields of message records to remove: copies of a tool's "
        "output kept for the UI (Claude Code's toolUseResult, with Edit's originalFile).",
    )
    records: list[str] = Field(
        default_factory=lambda: ["progress"],
        description="Records to drop, by type or type:subtype (progress, "
        "progress:bash_progress, system:turn_duration); the model never sees them.",
    )
    constant_fields: list[str] = Field(
        default_factory=list,
        description="Top-level fields to keep on the first record only, when every record "
        "holding one has the same value (cozempic's envelope-strip: cwd, version, gitBranch, "
        "slug, userType).",
    )
    file_history: Literal["latest", "keep"] = Field(
        "latest",
        description="latest: keep only the last file-history-snapshot of each message "
        "(later ones repeat and extend it); keep: leave them all.",
    )

    @field_validator("records")
    @classmethod
    def _not_messages(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if v.split(":", 1)[0] in MESSAGE_TYPES]
        if bad:
            raise ValueError(
                f"{bad[0]!r} holds messages the model sees; use a stage that edits messages"
            )
        return value


@register("prune_sidecars", options=PruneSidecarsOptions)
def prune_sidecars(
    conv: Conversation, opts: PruneSidecarsOptions, ctx: StageContext
) -> StageResult:
    """Drop the duplicate copies of tool output that the model never sees.

    Applies to: formats that expose their records (Claude Code sessions and subagent
    files); on others it changes nothing. Messages are never touched.

    Effect: removes the ``fields`` of message records (``toolUseResult``: stdout,
    the file a Read returned, Edit's whole ``originalFile``...; 2-7x the tool results
    in real sessions), drops ``records`` (``progress`` records: hook ticks,
    cumulative Bash output, subagent messages already in the subagent's own file)
    and, with ``file_history = "latest"``, every ``file-history-snapshot`` that a
    later one for the same message supersedes. Each of ``constant_fields`` that has
    one value in every record holding it stays on the first such record only. Records pointing at a dropped record
    are relinked to its nearest kept ancestor by the format; if that would split
    the conversation tree, nothing is dropped and a note says why. Texts the model
    never saw but an agent may want (Edit/Write ``originalFile``, the full output
    behind a ``<persisted-output>`` preview) are offloaded to
    ``{offload_dir}/prune_sidecars/``; every original record goes to the restore
    pack, so ``ctx restore`` gives back the file byte for byte.

    Interacts with: token counts do not change (only bytes do). Run it with
    ``drop_before_compaction`` for a session small enough for ``claude --resume``.
    """
    counters = {
        "fields_removed": 0,
        "records_dropped": 0,
        "snapshots_dropped": 0,
        "constant_fields_removed": 0,
    }
    records = conv.records
    if not records:
        return StageResult(conv, counters, ("the format exposes no records",))
    # Records whose message an earlier stage removed are dropped already.
    live = {m.key for m in conv.messages if m.key is not None}
    strip, drop = _sidecars(conv, opts, ctx, live, counters)
    for key, present in _constant_fields(conv, opts.constant_fields, drop, live).items():
        strip[key] = strip.get(key, frozenset()) | present
        counters["constant_fields_removed"] += len(present)
    if not strip and not drop:
        return StageResult(conv, counters)
    out = conv.with_record_edits(RecordEdits(drop=frozenset(drop), strip=strip))
    return unless_worse("prune_sidecars", conv, out, counters, ctx)


def _sidecars(
    conv: Conversation,
    opts: PruneSidecarsOptions,
    ctx: StageContext,
    live: Collection[int | None],
    counters: dict[str, int],
) -> tuple[dict[int, frozenset[str]], set[int]]:
    """The ``fields`` to strip from live message records, and the records to drop."""
    fields = frozenset(opts.fields)
    strip: dict[int, frozenset[str]] = {}
    drop: set[int] = set()
    latest: dict[str, int] = {}
    for rec in conv.records:
        data = rec.data
        if not isinstance(data, dict) or rec.key in conv.record_edits.drop:
            continue
        if rec.message:
            if rec.key not in live:
                continue
            present = frozenset(f for f in fields if f in data)
            if present:
                strip[rec.key] = present
                counters["fields_removed"] += len(present)
                _offload_ui_texts(rec, data, ctx)
            continue
        if data.get("type") in MESSAGE_TYPES:
            continue  # a message record the format did not load (no content): leave it
        if matches(data, opts.records):
            drop.add(rec.key)
            counters["records_dropped"] += 1
        elif opts.file_history == "latest" and data.get("type") == "file-history-snapshot":
            group = _snapshot_of(data)
            if group is None:
                continue
            earlier = latest.get(group)
            if earlier is not None:
                drop.add(earlier)
                counters["snapshots_dropped"] += 1
            latest[group] = rec.key
    return strip, drop


def _constant_fields(
    conv: Conversation, names: list[str], drop: set[int], live: Collection[int | None]
) -> dict[int, frozenset[str]]:
    """Choose the constant envelope fields to strip from all but the first record.

    Fields to strip: each of ``names`` whose kept records all hold one value, from
    every such record but the first (which keeps the value for the whole file).
    """
    if not names:
        return {}
    holders: dict[str, list[int]] = {name: [] for name in names}
    values: dict[str, set[str]] = {name: set() for name in names}
    for rec in conv.records:
        if rec.key in drop or rec.key in conv.record_edits.drop:
            continue
        if rec.message and rec.key not in live:
            continue
        data = rec.data  # read once: a large file's records are parsed again when read
        if not isinstance(data, dict):
            continue
        for name in names:
            if name in data:
                holders[name].append(rec.key)
                if len(values[name]) < 2:  # two values: not constant, whatever follows
                    values[name].add(repr(hydrate(data[name])))
    strip: dict[int, set[str]] = {}
    for name in names:
        if len(values[name]) != 1:
            continue
        for key in holders[name][1:]:
            strip.setdefault(key, set()).add(name)
    return {key: frozenset(fields) for key, fields in strip.items()}


def _snapshot_of(data: dict[str, Any]) -> str | None:
    # Updates carry their own messageId but name the snapshot they extend inside;
    # each holds the full set of tracked files, so the last one supersedes the rest.
    snapshot = data.get("snapshot")
    inner = snapshot.get("messageId") if isinstance(snapshot, dict) else None
    outer = data.get("messageId")
    group = inner if isinstance(inner, str) else outer
    return group if isinstance(group, str) else None


def _offload_ui_texts(rec: SourceRecord, data: dict[str, Any], ctx: StageContext) -> None:
    """Offload what a toolUseResult holds that the model's copy does not."""
    extra = data.get("toolUseResult")
    if not isinstance(extra, dict):
        return
    call_id = _result_call_id(data) or f"record-{rec.key}"
    original = read_text(extra.get("originalFile"))
    if isinstance(original, str) and original:
        ctx.offload.put("prune_sidecars", f"{call_id}.original", original)
    stdout = read_text(extra.get("stdout"))
    if isinstance(stdout, str) and stdout and _shows_persisted_preview(data):
        ctx.offload.put("prune_sidecars", f"{call_id}.stdout", stdout)


def _result_call_id(data: dict[str, Any]) -> str | None:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("tool_use_id"), str):
                return str(item["tool_use_id"])
    return None


def _shows_persisted_preview(data: dict[str, Any]) -> bool:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return False
    for item in content:
        if isinstance(item, dict) and item.get("type") == "tool_result":
            inner = read_text(item.get("content"))
            if isinstance(inner, str) and inner.startswith(PERSISTED):
                return True
            if isinstance(inner, list) and any(
                isinstance(p, dict) and str(read_text(p.get("text", ""))).startswith(PERSISTED)
                for p in inner
            ):
                return True
    return False
