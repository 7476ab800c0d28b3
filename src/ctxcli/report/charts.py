"""The report's charts as Vega-Lite specs, built with altair.

Vega-Lite rather than hand-drawn SVG: altair validates every spec against the
Vega-Lite schema, and the charts get axes, legends and tooltips for free. Big
sessions are binned here, so no chart holds more than a few thousand marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.core.install import install_command
from ctxcli.report.data import MessageRow, ReportData

__all__ = [
    "MAX_BARS",
    "MAX_COLOURS",
    "MAX_TOOL_ROWS",
    "missing",
    "monitors_spec",
    "stages_spec",
    "timeline_rows",
    "timeline_spec",
    "tools_spec",
]


def missing() -> str:
    """The error when the report's packages are missing, with the install that adds them."""
    return (
        "the HTML report needs altair and vl-convert-python; install them with "
        f"{install_command('report')}."
    )


MAX_BARS = 1200
"""Timeline bars at most: a longer session is shown in bins of consecutive messages."""
MAX_COLOURS = 9
"""Categories with a colour of their own; the rest share "other"."""
MAX_TOOL_ROWS = 15


def _alt() -> Any:
    try:
        import altair as alt  # heavy: only when a page is rendered
    except ImportError:
        raise CtxError(missing()) from None
    return alt


def timeline_rows(
    messages: Sequence[MessageRow], max_bars: int = MAX_BARS
) -> tuple[list[dict[str, Any]], int]:
    """One row per message, or per bin of ``stride`` messages; returns (rows, stride)."""
    totals = _sum_by(messages, lambda m: m.category, lambda m: m.tokens_before)
    top = set(sorted(totals, key=lambda c: (-totals[c], c))[:MAX_COLOURS])
    stride = max(1, -(-len(messages) // max_bars))
    rows: list[dict[str, Any]] = []
    for start in range(0, len(messages), stride):
        chunk = messages[start : start + stride]
        weights = _sum_by(chunk, lambda m: m.category, lambda m: m.tokens_before + 1)
        cat = max(weights, key=lambda c: weights[c])
        rows.append(
            {
                "start": start,
                "end": start + len(chunk),
                "messages": (
                    f"#{start}" if len(chunk) == 1 else f"#{start}–#{start + len(chunk) - 1}"
                ),
                "category": cat if cat in top else "other",
                "what": cat,
                "role": chunk[0].role if len(chunk) == 1 else "",
                "before": sum(m.tokens_before for m in chunk),
                "after": sum(m.tokens_after for m in chunk),
            }
        )
    return rows, stride


def _sum_by(items: Sequence[MessageRow], key: Any, value: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[key(it)] = out.get(key(it), 0) + value(it)
    return out


def timeline_spec(data: ReportData, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens per message: grey what there was, in colour what is left; compactions marked."""
    alt = _alt()
    x = alt.X("start:Q", title="message", scale=alt.Scale(nice=False))
    tooltip = [
        alt.Tooltip("messages:N"),
        alt.Tooltip("what:N", title="tool or role"),
        alt.Tooltip("before:Q", format=",", title="tokens before"),
        alt.Tooltip("after:Q", format=",", title="tokens after"),
    ]
    base = alt.Chart(alt.Data(values=rows))
    before = base.mark_bar(color="#d5d9e0").encode(
        x=x,
        x2="end:Q",
        y=alt.Y(
            "before:Q",
            # A square-root scale: after a 95% cut what is left would be a flat line.
            scale=alt.Scale(type="sqrt"),
            title="tokens (square-root scale)",
        ),
        y2=alt.datum(0),
        tooltip=tooltip,
    )
    after = base.mark_bar().encode(
        x=x,
        x2="end:Q",
        y="after:Q",
        y2=alt.datum(0),
        color=alt.Color("category:N", title="tool or role", scale=alt.Scale(scheme="tableau10")),
        tooltip=tooltip,
    )
    layers = [before, after]
    marks = [{"at": i, "label": "compaction"} for i in data.compactions]
    if data.resume_at is not None and data.resume_at not in data.compactions:
        marks.append({"at": data.resume_at, "label": "resume starts"})
    elif data.resume_at is not None:
        marks = [
            {**m, "label": "compaction · resume starts"} if m["at"] == data.resume_at else m
            for m in marks
        ]
    if marks:
        mark_base = alt.Chart(alt.Data(values=marks))
        layers.append(
            mark_base.mark_rule(color="#c0392b", strokeDash=[4, 3], strokeWidth=2).encode(
                x="at:Q", tooltip=["label:N"]
            )
        )
        layers.append(
            mark_base.mark_text(align="left", dx=4, dy=-4, color="#c0392b", baseline="top").encode(
                x="at:Q", y=alt.value(0), text="label:N"
            )
        )
    chart = alt.layer(*layers).properties(width="container", height=260)
    return _spec(chart)


def tools_spec(data: ReportData) -> dict[str, Any]:
    """Tokens per tool (and per kind of other text), before and after."""
    alt = _alt()
    rows = [
        {"name": r.name, "when": when, "tokens": tokens, "order": i}
        for i, r in enumerate(data.by_tool[:MAX_TOOL_ROWS])
        for when, tokens in (("before", r.tokens_before), ("after", r.tokens_after))
    ]
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(
            y=alt.Y("name:N", sort=alt.EncodingSortField("order"), title=None),
            yOffset=alt.YOffset("when:N", sort=["before", "after"]),
            x=alt.X("tokens:Q", title="tokens"),
            color=alt.Color(
                "when:N",
                sort=["before", "after"],
                scale=alt.Scale(range=["#b8c0cc", "#2f6fb3"]),
                title=None,
            ),
            tooltip=["name:N", "when:N", alt.Tooltip("tokens:Q", format=",")],
        )
        .properties(width="container", height=max(120, 34 * len(rows) // 2))
    )
    return _spec(chart)


def stages_spec(data: ReportData) -> dict[str, Any]:
    """Tokens each stage removed, in the order they ran."""
    alt = _alt()
    rows = [
        {
            "stage": f"{i + 1}. {s.stage}",
            "removed": s.tokens_before - s.tokens_after,
            "changed": s.changed,
        }
        for i, s in enumerate(data.report.stages)
    ]
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar(color="#2f6fb3")
        .encode(
            y=alt.Y("stage:N", sort=None, title=None),
            x=alt.X("removed:Q", title="tokens removed"),
            tooltip=["stage:N", alt.Tooltip("removed:Q", format=","), "changed:Q"],
        )
        .properties(width="container", height=max(60, 30 * len(rows)))
    )
    return _spec(chart)


def monitors_spec(data: ReportData) -> dict[str, Any]:
    """The six stuck-agent monitors after each tool call (sampled)."""
    alt = _alt()
    rows = [
        {"calls": k, "monitor": name, "score": score}
        for k, scores in data.monitors
        for name, score in scores.items()
    ]
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=len(data.monitors) <= 60, interpolate="step-after")
        .encode(
            x=alt.X("calls:Q", title="tool calls so far"),
            y=alt.Y(
                "score:Q",
                scale=alt.Scale(domain=[0, 1]),
                title="score (what each measures, 0 to 1)",
            ),
            color=alt.Color("monitor:N", scale=alt.Scale(scheme="dark2")),
            tooltip=["calls:Q", "monitor:N", alt.Tooltip("score:Q", format=".2f")],
        )
        .properties(width="container", height=220)
    )
    return _spec(chart)


def _spec(chart: Any) -> dict[str, Any]:
    spec: dict[str, Any] = chart.to_dict()
    spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    return spec
