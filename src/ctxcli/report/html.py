"""Render :class:`~ctxcli.report.data.ReportData` as one self-contained HTML page.

The page needs no network when it is opened: Vega, Vega-Lite and vega-embed are
inlined from the JavaScript bundle that ``vl-convert-python`` ships (the same one
altair inlines with ``to_html(inline=True)``), styles are inline, data is embedded
as JSON. Large sessions stay small: the timeline is binned, the conversation list
keeps short previews (fewer, or none, the longer the session), long texts are cut
to head and tail, and the page says so wherever it does.
"""

from __future__ import annotations

import difflib
import functools
import html
import json
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.core.monitors import MONITOR_HELP, StuckRule, looks_stuck
from ctxcli.report.charts import (
    missing,
    monitors_spec,
    stages_spec,
    timeline_rows,
    timeline_spec,
    tools_spec,
)
from ctxcli.report.cost import CostTimeline, cost_section, cost_spec
from ctxcli.report.data import Item, MessageRow, ReportData, shown_text

__all__ = ["render_html"]

PREVIEW_BUDGET_CHARS = 1_000_000
"""Characters of message previews a page holds at most, over all messages."""
MAX_PREVIEW_CHARS = 240
MAX_LIST_ROWS = 20_000
"""Messages listed at most (the largest ones when a session has more)."""
MAX_DIFF_LINES = 200


@functools.cache
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (assigns ``window.vegaEmbed``)."""
    try:
        import vl_convert
    except ImportError:
        raise CtxError(missing()) from None

    bundle: str = vl_convert.javascript_bundle()  # type: ignore[call-arg]  # stub lacks the default
    return bundle


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _n(value: int) -> str:
    return f"{value:,}"


def _pct(before: int, after: int) -> str:
    return "0.0%" if before <= 0 else f"{100.0 * (before - after) / before:.1f}%"


def _json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_html(data: ReportData, cost: CostTimeline | None = None) -> str:
    """The report page for ``data``, with the ``cost`` timeline when given."""
    rows, stride = timeline_rows(data.messages)
    listed, preview_chars, list_note = _listed(data.messages)
    payload = _payload(data, rows, listed, preview_chars)
    if cost is not None:
        payload["specs"]["cost"] = cost_spec(cost)
    title = f"ctx report · {data.report.input}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        _header(data),
        _notes(_page_notes(data, len(rows), stride, list_note)),
        cost_section(cost),
        *_sections(data, len(listed)),
        _about(data),
        f'<script type="application/json" id="ctx-data">{_json(payload)}</script>',
        f'<script type="module">{vega_bundle()}</script>',
        f'<script type="module">{_JS}</script>',
        "</body></html>",
    ]
    return "\n".join(parts)


def _page_notes(data: ReportData, bars: int, stride: int, list_note: str) -> list[str]:
    """What the page leaves out or samples, said above the charts."""
    notes: list[str] = []
    if stride > 1:
        notes.append(
            f"The timeline shows {bars:,} bars of {stride:,} consecutive messages each "
            f"(coloured by the tool or role with the most tokens in the bar), not "
            f"{len(data.messages):,} single messages."
        )
    if list_note:
        notes.append(list_note)
    if data.monitors and data.monitors[-1][0] > len(data.monitors):
        notes.append(
            f"The monitors are sampled at {len(data.monitors):,} of {data.steps:,} tool calls."
        )
    if data.changed_blocks > len(data.top):
        notes.append(
            f"{data.changed_blocks:,} blocks were removed or shortened; the {len(data.top)} "
            "largest are shown."
        )
    return notes


def _payload(
    data: ReportData, rows: list[dict[str, Any]], listed: list[MessageRow], preview_chars: int
) -> dict[str, Any]:
    """What the page's script draws: the chart specs and the listed messages."""
    return {
        "specs": {
            "timeline": timeline_spec(data, rows),
            "tools": tools_spec(data),
            "stages": stages_spec(data),
            "monitors": monitors_spec(data),
        },
        "messages": [
            [
                m.index,
                m.role,
                m.category,
                m.tokens_before,
                m.tokens_after,
                m.preview[:preview_chars],
            ]
            for m in listed
        ],
    }


def _sections(data: ReportData, listed: int) -> list[str]:
    """The page's sections, in order."""
    return [
        _section(
            "timeline",
            "Where the tokens go, message by message",
            "Grey: tokens of each message before the reduction; colour: what is left after it "
            "(by the tool the message calls or answers, else its role). "
            "Dashed lines mark compactions and where a resumed session starts.",
            '<div class="chart" id="chart-timeline"></div>',
        ),
        '<div class="two">',
        _section(
            "tools",
            "Tokens by tool",
            "Calls and results of each tool, and the other text, before and after.",
            '<div class="chart" id="chart-tools"></div>' + _tools_table(data),
        ),
        _section(
            "stages",
            "What each stage removed",
            f"Stages run in this order; configuration from {_e(data.config.get('source', ''))}.",
            '<div class="chart" id="chart-stages"></div>' + _stages_table(data),
        ),
        "</div>",
        _section(
            "monitors",
            "Where the agent looked stuck",
            _stuck_note(data),
            f'<div class="chart" id="chart-monitors" data-steps="{data.steps}"></div>'
            + ("" if data.steps else '<p class="empty">The agent made no tool calls.</p>')
            + _monitors_table(data),
        ),
        _section(
            "top",
            f"The {len(data.top)} largest removals",
            "Each block as it was and as the reduction leaves it; the offload file keeps "
            "the original (<code>ctx reduce</code> writes it, <code>ctx restore</code> "
            "puts it back).",
            _items(data.top),
        ),
        _section(
            "conversation",
            "The conversation",
            "Every message with its tokens before → after; rows the reduction changed are marked.",
            _conversation_shell(len(data.messages), listed),
        ),
    ]


def _listed(messages: list[MessageRow]) -> tuple[list[MessageRow], int, str]:
    """The messages the list holds, the preview length, and what the page says about it."""
    listed = messages
    note = ""
    if len(messages) > MAX_LIST_ROWS:
        keep = sorted(messages, key=lambda m: (-m.tokens_before, m.index))[:MAX_LIST_ROWS]
        listed = sorted(keep, key=lambda m: m.index)
        note = (
            f"The conversation list holds the {MAX_LIST_ROWS:,} largest of "
            f"{len(messages):,} messages."
        )
    # At most MAX_LIST_ROWS rows, so a preview keeps >= 50 characters.
    chars = min(MAX_PREVIEW_CHARS, PREVIEW_BUDGET_CHARS // max(1, len(listed)))
    if chars < MAX_PREVIEW_CHARS:
        note = (note + " " if note else "") + (
            f"Message previews are cut to {chars} characters to keep the page small."
        )
    return listed, chars, note


def _header(data: ReportData) -> str:
    rep = data.report
    cards = [
        ("tokens-before", "tokens before", rep.tokens_before, _n(rep.tokens_before)),
        ("tokens-after", "tokens after", rep.tokens_after, _n(rep.tokens_after)),
        ("saved", "saved", None, _pct(rep.tokens_before, rep.tokens_after)),
        ("messages", "messages", rep.messages, _n(rep.messages)),
        ("bytes-before", "file bytes before", rep.bytes_before, _n(rep.bytes_before)),
        ("bytes-after", "file bytes after", rep.bytes_after, _n(rep.bytes_after)),
    ]
    if rep.resume_tokens_before is not None and rep.resume_tokens_after is not None:
        cards.append(
            (
                "resume-tokens-before",
                "a resume sends (before)",
                rep.resume_tokens_before,
                _n(rep.resume_tokens_before),
            )
        )
        cards.append(
            (
                "resume-tokens-after",
                "a resume sends (after)",
                rep.resume_tokens_after,
                _n(rep.resume_tokens_after),
            )
        )
    html_cards = "".join(
        f'<div class="card"><div class="label">{_e(label)}</div>'
        f'<div class="value" id="{cid}"'
        + (f' data-value="{value}"' if value is not None else "")
        + f">{_e(text)}</div></div>"
        for cid, label, value, text in cards
    )
    warnings = "".join(f"<li>{_e(w)}</li>" for w in rep.warnings)
    return (
        "<header><h1>ctx report</h1>"
        f'<p class="sub"><b>{_e(rep.input)}</b> · {_e(rep.format)} · tokenizer '
        f"{_e(rep.tokenizer)} · ctx {_e(data.version)}</p>"
        f'<div class="cards">{html_cards}</div>'
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + "</header>"
    )


def _notes(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{_e(n)}</li>" for n in notes)
    return f'<section class="notes" id="sampling"><b>This page is condensed:</b><ul>{items}</ul></section>'


def _section(sid: str, title: str, lead: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{_e(title)}</h2><p class="lead">{lead}</p>{body}</section>'


def _tools_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr data-tool="{_e(r.name)}" data-calls="{r.calls}" data-tokens-before="{r.tokens_before}"'
        f' data-tokens-after="{r.tokens_after}"><td>{_e(r.name)}</td><td>{_n(r.calls)}</td>'
        f"<td>{_n(r.tokens_before)}</td><td>{_n(r.tokens_after)}</td>"
        f"<td>{_pct(r.tokens_before, r.tokens_after)}</td></tr>"
        for r in data.by_tool
    )
    return (
        '<table class="num" id="table-tools"><thead><tr><th>tool or text</th><th>calls</th>'
        "<th>before</th><th>after</th><th>saved</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _stages_table(data: ReportData) -> str:
    rep = data.report
    rows = "".join(
        f'<tr data-stage="{_e(s.stage)}" data-changed="{s.changed}" data-offloaded="{s.offloaded}"'
        f' data-tokens-before="{s.tokens_before}" data-tokens-after="{s.tokens_after}">'
        f"<td>{_e(s.stage)}</td><td>{_n(s.changed)}</td><td>{_n(s.offloaded)}</td>"
        f"<td>{_n(s.tokens_before)}</td><td>{_n(s.tokens_after)}</td>"
        f"<td>{_pct(s.tokens_before, s.tokens_after)}</td></tr>"
        for s in rep.stages
    )
    total = (
        f'<tr class="total"><td>total</td><td>{_n(sum(s.changed for s in rep.stages))}</td>'
        f"<td>{_n(sum(s.offloaded for s in rep.stages))}</td><td>{_n(rep.tokens_before)}</td>"
        f"<td>{_n(rep.tokens_after)}</td><td>{_pct(rep.tokens_before, rep.tokens_after)}</td></tr>"
    )
    return (
        '<table class="num" id="table-stages"><thead><tr><th>stage</th><th>changed</th>'
        "<th>offloaded</th><th>before</th><th>after</th><th>saved</th></tr></thead>"
        f"<tbody>{rows}{total}</tbody></table>"
    )


def _stuck_note(data: ReportData) -> str:
    """What the monitors say, by the rule ``nudge_early_exit`` acts on."""
    rule = StuckRule()
    when = next((k for k, scores in data.monitors if looks_stuck(scores, rule)), None)
    verdict = "they never do here." if when is None else f"they first do after {when:,} tool calls."
    return (
        "The six monitors of <code>ctx stats</code> as the session went on, each scoring "
        "what its row below says (0 = none of it). The agent looks stuck, and "
        f"<code>nudge_early_exit</code> would nudge it, when streak &gt; {rule.streak}, or "
        f"hedge &gt; {rule.hedge} with diversity &gt; {rule.diversity}: {verdict}"
    )


def _monitors_table(data: ReportData) -> str:
    rows = "".join(
        f'<tr data-monitor="{_e(name)}" data-score="{score}"><td>{_e(name)}</td>'
        f"<td>{score:.2f}</td><td>{_e(MONITOR_HELP.get(name, ''))}</td></tr>"
        for name, score in data.report.monitors.items()
    )
    return (
        '<table class="num" id="table-monitors"><thead><tr><th>monitor</th>'
        "<th>at the end</th><th>measures</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _where(it: Item) -> str:
    """Where the page says the original of ``it`` is: an offload file, else the restore pack."""
    if it.offload_path is None:
        return (
            '<p class="path">no offload file: the stage dropped it '
            "(<code>ctx restore</code> still brings it back)</p>"
        )
    if it.offload_whole:
        return f'<p class="path">original in <code>{_e(it.offload_path)}</code></p>'
    return (
        f'<p class="path">as a later stage offloaded it, after {_e(it.stage)} changed it, in '
        f"<code>{_e(it.offload_path)}</code> (<code>ctx restore</code> brings back the "
        "original)</p>"
    )


def _diff(item: Item) -> str:
    """A unified diff when the stage edited the text (kept some of its lines)."""
    if item.change != "edited":
        return ""  # removed or replaced outright: before/after side by side says it all
    before = shown_text(item.before).splitlines()
    after = shown_text(item.after).splitlines()
    lines = list(difflib.unified_diff(before, after, "before", "after", lineterm="", n=2))
    if not lines:
        return ""
    cut = len(lines) > MAX_DIFF_LINES
    out = []
    for line in lines[:MAX_DIFF_LINES]:
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        out.append(f'<span class="{cls}">{_e(line)}</span>')
    more = f"\n… {len(lines) - MAX_DIFF_LINES:,} more diff lines" if cut else ""
    return (
        "<details><summary>diff</summary>"
        f'<pre class="diff">{chr(10).join(out)}{_e(more)}</pre></details>'
    )


def _items(items: list[Item]) -> str:
    if not items:
        return '<p class="empty">No stage removed or shortened anything.</p>'
    out = []
    for rank, it in enumerate(items, 1):
        what = f"{it.tool} {it.kind.replace('tool_', '')}" if it.tool else f"{it.role} {it.kind}"
        verdict = {"removed": "removed", "edited": "shortened", "replaced": "replaced"}[it.change]
        path = _where(it)
        after = (
            f"<pre>{_e(shown_text(it.after))}</pre>"
            if it.after
            else '<pre class="gone">(nothing left)</pre>'
        )
        out.append(
            f'<details class="item" data-saved="{it.saved}"{" open" if rank == 1 else ""}>'
            f'<summary><b>#{rank}</b> <span class="minus">−{_n(it.saved)}</span> tokens · '
            f"{_e(what)} · message #{it.message} · {_e(verdict)} by "
            f"<code>{_e(it.stage)}</code> ({_n(it.tokens_before)} → {_n(it.tokens_after)})</summary>"
            f"{path}"
            f'<div class="sbs"><div><h4>before</h4><pre>{_e(shown_text(it.before))}</pre></div>'
            f"<div><h4>after</h4>{after}</div></div>"
            f"{_diff(it) if it.after else ''}</details>"
        )
    return "".join(out)


def _conversation_shell(total: int, listed: int) -> str:
    return (
        '<div class="pager"><button id="prev">‹ previous</button>'
        '<span id="page-info"></span><button id="next">next ›</button>'
        '<label><input type="checkbox" id="only-changed"> only changed messages</label></div>'
        '<table id="table-messages" class="msgs"><thead><tr><th>#</th><th>role</th>'
        "<th>tool or role</th><th>before</th><th>after</th><th>what it says</th></tr></thead>"
        f'<tbody></tbody></table><p class="lead">{listed:,} of {total:,} messages listed.</p>'
    )


def _about(data: ReportData) -> str:
    rep = data.report
    config = json.dumps(data.config, indent=2, ensure_ascii=False)
    return (
        '<section id="about"><h2>About this run</h2><table class="kv">'
        f"<tr><th>input</th><td>{_e(rep.input)}</td></tr>"
        f'<tr><th>input sha256</th><td><code id="input-sha256">{_e(data.input_sha256)}</code></td></tr>'
        f"<tr><th>format</th><td>{_e(rep.format)}</td></tr>"
        f'<tr><th>tokenizer</th><td id="tokenizer">{_e(rep.tokenizer)}</td></tr>'
        f'<tr><th>ctx version</th><td id="ctx-version">{_e(data.version)}</td></tr>'
        f"<tr><th>offload directory</th><td>{_e(rep.offload_dir or '')}</td></tr>"
        f"<tr><th>configuration</th><td><pre>{_e(config)}</pre></td></tr>"
        "</table></section>"
    )


_CSS = """
:root{--fg:#1d2330;--mut:#5d6676;--bg:#f6f7f9;--card:#fff;--line:#e1e4ea;--acc:#2f6fb3}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 64px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{margin:0 0 4px;font-size:24px}h2{margin:0 0 4px;font-size:18px}h4{margin:4px 0;font-size:12px;color:var(--mut);text-transform:uppercase}
.sub,.lead{color:var(--mut);margin:0 0 12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:140px}
.card .label{color:var(--mut);font-size:12px}.card .value{font-size:20px;font-weight:600}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:16px 0}
.two{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}.two section{margin:0;overflow-x:auto}.two table{font-size:13px}.two th,.two td{padding:4px 6px}
@media (max-width:1000px){.two{grid-template-columns:1fr}}
.notes{background:#fff8e6;border-color:#f0d9a0}.notes ul{margin:6px 0 0 18px;padding:0}
.warnings{color:#8a5a00}
.chart{width:100%;min-height:60px}
table{border-collapse:collapse;width:100%;margin-top:10px}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
table.num td:not(:first-child),table.num th:not(:first-child){text-align:right;font-variant-numeric:tabular-nums}
table.num td:last-child{white-space:normal}
#table-monitors td:last-child,#table-monitors th:last-child{text-align:left}
tr.total td{font-weight:600;border-top:2px solid var(--line)}
details.item{border:1px solid var(--line);border-radius:8px;padding:6px 10px;margin:8px 0}
details.item summary{cursor:pointer}.minus{color:#b03a2e;font-weight:600}
.sbs{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:10px}
pre{margin:0;padding:8px;background:#f3f4f7;border-radius:6px;max-height:320px;overflow:auto;white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre.gone{color:var(--mut);font-style:italic}
.diff .add{color:#1f7a35;background:#e9f7ec;display:block}.diff .del{color:#a12a2a;background:#fbecec;display:block}.diff .ctx{display:block}
.path{margin:4px 0 8px;color:var(--mut)}
.pager{display:flex;gap:10px;align-items:center;margin:8px 0}
.pager button{padding:3px 10px}
table.msgs td:nth-child(4),table.msgs td:nth-child(5){text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.msgs td:last-child{color:#3a4150;font-size:12.5px;word-break:break-word}
tr.changed td:nth-child(5){color:#b03a2e;font-weight:600}
.role-user td:nth-child(2){color:#2f6fb3}.role-assistant td:nth-child(2){color:#7a3fb0}
table.kv th{width:160px;color:var(--mut);font-weight:500}
"""

_JS = """
const data = JSON.parse(document.getElementById('ctx-data').textContent);
const opts = {actions: false, renderer: 'svg'};
window.ctxCharts = Promise.all(Object.entries(data.specs).map(
  ([name, spec]) => vegaEmbed('#chart-' + name, spec, opts)));
window.ctxCharts.then(() => { document.body.dataset.charts = 'drawn'; });
const rows = data.messages, per = 100;
let page = 0, shown = rows;
const body = document.querySelector('#table-messages tbody');
const fmt = n => n.toLocaleString('en-US');
function draw() {
  const pages = Math.max(1, Math.ceil(shown.length / per));
  page = Math.min(Math.max(page, 0), pages - 1);
  body.replaceChildren(...shown.slice(page * per, page * per + per).map(r => {
    const tr = document.createElement('tr');
    tr.className = 'role-' + r[1] + (r[4] < r[3] ? ' changed' : '');
    for (const v of [r[0], r[1], r[2], fmt(r[3]), fmt(r[4]), r[5]]) {
      const td = document.createElement('td'); td.textContent = v; tr.appendChild(td);
    }
    return tr;
  }));
  document.getElementById('page-info').textContent =
    'page ' + (page + 1) + ' of ' + pages + ' (' + fmt(shown.length) + ' messages)';
}
document.getElementById('prev').onclick = () => { page--; draw(); };
document.getElementById('next').onclick = () => { page++; draw(); };
document.getElementById('only-changed').onchange = e => {
  shown = e.target.checked ? rows.filter(r => r[4] < r[3]) : rows; page = 0; draw();
};
draw();
"""
