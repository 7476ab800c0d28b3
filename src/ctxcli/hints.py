"""The texts ctx leaves where it took something out, in English and Chinese.

Every hint starts with ``[ctx`` and names the offload file, so an agent can read the
original back and a rerun can recognise what was already reduced. Detection lives
next to construction so the two can never drift apart.
"""

from __future__ import annotations

import re

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
_CLEAR_ARGS = {
    "en": "[ctx: arguments cleared; saved to {path}]",
    "zh": "[ctx: 参数已清除；已保存到 {path}]",
}

_SUMMARY = {
    "en": "[ctx: summary of {count} earlier messages; full text saved to {path}]",
    "zh": "[ctx: 之前 {count} 条消息的摘要；全文已保存到 {path}]",
}

_TRUNC_RE = re.compile(r"\[ctx: (?:output truncated|输出已截断)[^\]\n]*\]")
_CLEAR_RE = re.compile(r"^\[ctx: (?:old tool result cleared|旧的工具结果已清除)[^\]\n]*\]$")
_CLEAR_ARGS_RE = re.compile(r"\[ctx: (?:arguments cleared|参数已清除)[^\]\n]*\]")
_SUMMARY_RE = re.compile(
    r"\[ctx: (?:summary of \d+ earlier messages|之前 \d+ 条消息的摘要)[^\]\n]*\]"
)


def truncation_hint(language: str, *, path: str, total: int, omitted: int, read_tool: str) -> str:
    """The marker placed between head and tail of a truncated tool result."""
    return _TRUNC[language].format(path=path, total=total, omitted=omitted, read_tool=read_tool)


def clear_hint(language: str, *, path: str) -> str:
    """The one-line replacement of a cleared tool result."""
    return _CLEAR[language].format(path=path)


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


def is_cleared(text: str) -> bool:
    """True if ``text`` is a clear hint from ctx."""
    return text.startswith("[ctx: ") and _CLEAR_RE.match(text) is not None


def is_cleared_args(text: str) -> bool:
    """True if tool-call arguments were already replaced by ctx."""
    return "[ctx: " in text and _CLEAR_ARGS_RE.search(text) is not None


def is_ctx_marked(text: str) -> bool:
    """True if any ctx stage has already rewritten ``text``."""
    return "[ctx" in text and (is_truncated(text) or is_cleared(text) or is_cleared_args(text))
