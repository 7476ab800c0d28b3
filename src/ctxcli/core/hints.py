"""The texts ctx leaves where it took something out, in English and Chinese.

Every hint starts with ``[ctx`` and names the offload file, so an agent can read the
original back and a rerun can recognise what was already reduced. Detection lives
next to construction so the two can never drift apart.
"""

from __future__ import annotations

import re

__all__ = [
    "before_compaction_hint",
    "cites_before_compaction",
    "clear_args_hint",
    "clear_hint",
    "is_cleared",
    "is_cleared_args",
    "is_ctx_marked",
    "is_deduped",
    "is_reminder_removed",
    "is_summary",
    "is_truncated",
    "reminder_removed_hint",
    "same_as_hint",
    "stale_read_hint",
    "summary_hint",
    "truncated_path",
    "truncation_hint",
]

_TRUNC = {
    "en": (
        "[ctx: output truncated, {omitted} of {total} chars omitted; full output saved to "
        "{path} (read it with {read_tool})]"
    ),
    "zh": "[ctx: 输出已截断，共 {total} 个字符，省略 {omitted} 个；完整输出已保存到 {path}（可用 {read_tool} 读取）]",
}
_CLEAR = {
    "en": "[ctx: old tool result cleared; full content saved to {path}]",
    "zh": "[ctx: 旧的工具结果已清除；完整内容已保存到 {path}]",
}
# The default, compact form (about 12 cl100k tokens against the long form's 34-44):
# what happened and the file that holds the text, nothing else.
_CLEAR_SHORT = {
    "en": "[ctx cleared: {path}]",
    "zh": "[ctx 已清除: {path}]",
}
# The bare marker, as short as LangChain's "[cleared]": names no file, so the agent
# cannot read the text back (ctx restore still can).
_CLEAR_MARKER = {"en": "[ctx cleared]", "zh": "[ctx 已清除]"}
_CLEAR_ARGS = {
    "en": "[ctx: arguments cleared; saved to {path}]",
    "zh": "[ctx: 参数已清除；已保存到 {path}]",
}

_SUMMARY = {
    "en": "[ctx: summary of {count} earlier messages; full text saved to {path}]",
    "zh": "[ctx: 之前 {count} 条消息的摘要；全文已保存到 {path}]",
}

_SAME_AS = {
    "en": "[ctx: same output as the earlier {tool} result {ref}; full text saved to {path}]",
    "zh": "[ctx: 与之前 {tool} 的结果 {ref} 相同；全文已保存到 {path}]",
}
_STALE_READ = {
    "en": "[ctx: stale read of {file}: the file was edited later; this read is saved to {path}]",
    "zh": "[ctx: {file} 的过期读取：文件之后被修改过；本次读取内容已保存到 {path}]",
}
_BEFORE_COMPACTION = {
    "en": "[ctx: the {count} messages before this compaction are saved to {path}]",
    "zh": "[ctx: 此次压缩之前的 {count} 条消息已保存到 {path}]",
}
_REMINDER_REMOVED = {
    "en": "[ctx: repeated system reminder removed]",
    "zh": "[ctx: 重复的系统提醒已删除]",
}

_TRUNC_RE = re.compile(r"\[ctx: (?:output truncated|输出已截断)[^\]\n]*\]")
# The path a truncation hint cites (paths hold no "]" nor a line break, see _TRUNC_RE).
_TRUNC_PATH_RE = re.compile(
    r"\[ctx: (?:output truncated, [^\]\n]* full output saved to (?P<en>[^\]\n]+) "
    r"\(read it with [^\]\n()]*\)|输出已截断[^\]\n]*完整输出已保存到 (?P<zh>[^\]\n]+)（可用 [^\]\n]* 读取）)\]"
)
_CLEAR_RE = re.compile(
    r"^\[ctx(?:: (?:old tool result cleared|旧的工具结果已清除)[^\]\n]*"
    r"| (?:cleared|已清除)(?:: [^\]\n]*)?)\]$"
)
_CLEAR_ARGS_RE = re.compile(r"\[ctx: (?:arguments cleared|参数已清除)[^\]\n]*\]")
_SUMMARY_RE = re.compile(
    r"\[ctx: (?:summary of \d+ earlier messages|之前 \d+ 条消息的摘要)[^\]\n]*\]"
)


_SAME_AS_RE = re.compile(r"^\[ctx: (?:same output as the earlier|与之前) [^\]\n]*\]$")
_STALE_READ_RE = re.compile(r"^\[ctx: (?:stale read of .*|.* 的过期读取：.*)\]$")
_BEFORE_COMPACTION_RE = re.compile(
    r"\[ctx: (?:the \d+ messages before this compaction|此次压缩之前的 \d+ 条消息)[^\]\n]*\]"
)
_REMINDER_REMOVED_RE = re.compile(
    r"^\[ctx: (?:repeated system reminder removed|重复的系统提醒已删除)\]$"
)


def truncation_hint(language: str, *, path: str, total: int, omitted: int, read_tool: str) -> str:
    """The marker placed between head and tail of a truncated tool result."""
    return _TRUNC[language].format(path=path, total=total, omitted=omitted, read_tool=read_tool)


def clear_hint(language: str, *, path: str, form: str = "long") -> str:
    """The one-line replacement of a cleared tool result.

    ``form``: ``long`` (a sentence naming the file), ``short`` (marker and file) or
    ``marker`` (no file).
    """
    table = {"long": _CLEAR, "short": _CLEAR_SHORT, "marker": _CLEAR_MARKER}[form]
    return table[language].format(path=path)


def clear_args_hint(language: str, *, path: str) -> str:
    """The replacement text of cleared tool-call arguments."""
    return _CLEAR_ARGS[language].format(path=path)


def summary_hint(language: str, *, count: int, path: str) -> str:
    """The first line of a summary message written by the summarize stage."""
    return _SUMMARY[language].format(count=count, path=path)


def is_summary(text: str) -> bool:
    """True if ``text`` is a summary message written by ctx."""
    return text.startswith("[ctx: ") and _SUMMARY_RE.match(text) is not None


def is_truncated(text: str) -> bool:
    """True if ``text`` already carries a truncation marker from ctx."""
    return "[ctx: " in text and _TRUNC_RE.search(text) is not None


def truncated_path(text: str) -> str | None:
    """The file a truncation hint in ``text`` cites (the full output), or None."""
    if "[ctx: " not in text:
        return None
    m = _TRUNC_PATH_RE.search(text)
    return None if m is None else m.group("en") or m.group("zh")


def is_cleared(text: str) -> bool:
    """True if ``text`` is a clear hint from ctx, in the short or the long form."""
    return text.startswith("[ctx") and _CLEAR_RE.match(text) is not None


def is_cleared_args(text: str) -> bool:
    """True if tool-call arguments were already replaced by ctx."""
    return "[ctx: " in text and _CLEAR_ARGS_RE.search(text) is not None


def same_as_hint(language: str, *, tool: str, ref: str, path: str) -> str:
    """The one-line stand-in for a tool result identical to an earlier one."""
    return _SAME_AS[language].format(tool=tool, ref=ref, path=path)


def stale_read_hint(language: str, *, file: str, path: str) -> str:
    """The one-line stand-in for a file read that a later edit made stale."""
    return _STALE_READ[language].format(file=file, path=path)


def before_compaction_hint(language: str, *, count: int, path: str) -> str:
    """The line added to a compaction summary naming where the earlier messages went."""
    return _BEFORE_COMPACTION[language].format(count=count, path=path)


def reminder_removed_hint(language: str) -> str:
    """What is left of a tool result that was nothing but a repeated system reminder."""
    return _REMINDER_REMOVED[language]


def is_deduped(text: str) -> bool:
    """True if ``text`` is a same-as or stale-read stand-in from dedupe_outputs."""
    return text.startswith("[ctx: ") and (
        _SAME_AS_RE.match(text) is not None or _STALE_READ_RE.match(text) is not None
    )


def cites_before_compaction(text: str) -> bool:
    """True if a compaction summary already names where drop_before_compaction put its messages."""
    return "[ctx: " in text and _BEFORE_COMPACTION_RE.search(text) is not None


def is_reminder_removed(text: str) -> bool:
    """True if ``text`` is what strip_system_reminders left of a reminder-only result."""
    return text.startswith("[ctx: ") and _REMINDER_REMOVED_RE.match(text) is not None


def is_ctx_marked(text: str) -> bool:
    """True if any ctx stage has already rewritten ``text``."""
    return "[ctx" in text and (
        is_truncated(text)
        or is_cleared(text)
        or is_cleared_args(text)
        or is_deduped(text)
        or is_reminder_removed(text)
    )


def split_preview(text: str, budget: int) -> tuple[str, str]:
    """Head and tail of ``text`` that fit ``budget`` characters together.

    Cuts snap to line boundaries when that keeps at least half of each side, so the
    agent sees whole lines of a log or a file rather than a word cut in two.
    """
    if budget <= 0:
        return "", ""
    head_n = budget // 2
    tail_n = budget - head_n
    head = text[:head_n]
    cut = head.rfind("\n")
    if cut >= head_n // 2:
        head = head[:cut]
    tail = text[len(text) - tail_n :] if tail_n else ""
    cut = tail.find("\n")
    if 0 <= cut <= tail_n // 2:
        tail = tail[cut + 1 :]
    return head, tail


def truncation_preview(
    text: str, limit: int, path: str, read_tool: str, language: str, *, tail: bool = True
) -> str:
    """Head, hint and tail of ``text``, at most ``limit`` characters together.

    What ``truncate_tool_output`` and the Claude Code hook (``ctx hooks``) leave in place of
    a long tool output whose full text went to ``path``. ``tail=False`` keeps the head
    only, the hint last: for a file read whose lines the client numbers in order, where a
    tail after the hint would carry wrong line numbers.
    """
    # Size the preview with the longest possible hint, then fill in the real count.
    widest = truncation_hint(
        language, path=path, total=len(text), omitted=len(text), read_tool=read_tool
    )
    budget = limit - len(widest) - 2
    if tail:
        head, end = split_preview(text, budget)
    else:
        head, end = split_preview(text, 2 * budget)[0], ""
    hint = truncation_hint(
        language,
        path=path,
        total=len(text),
        omitted=len(text) - len(head) - len(end),
        read_tool=read_tool,
    )
    if not tail:
        return f"{head}\n{hint}" if head else hint
    return f"{head}\n{hint}\n{end}" if head or end else hint
