"""``report.html``: one graded submission as a self-contained static page
(inline style, no external resource, no server), rendered from its
results.json (schema ``lmspec-grade/2``, docs/grading.md).

What it shows: the score and verdict; every item with its status, points,
STRICT result, explanation and likely cause, each item id linking to the
specification page (``spec.html#<item id>``, written by ``lmspec spec
--html``); the failing tests' messages per item; the STRICT findings; the
from-scratch audit; warnings and faults; where the time went; and, for a
batch, the submission's content hash and the Dask worker that graded it.
A few lines of script make the tables sortable; the page reads the same
without them.
"""

import html
import re
from typing import Any

from lmspec import __version__
from lmspec.tools.grade.results import PHASES

MESSAGE_CAP = 20_000
TESTS_SHOWN = 25
_GROUP_TITLES = {
    "core": "Core items (scored)",
    "extended": "Extended items (optional, scored separately)",
    "should": "SHOULD rules (reported, not in the score)",
    "audit": "From-scratch audit (SPEC §0, SHOULD; not in the score)",
}
_CAUSE = re.compile(r"likely cause:\s*(.+?)(?=;\s*likely cause:|\s*$)", re.S)

STYLE = " ".join(
    (
        "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em auto;",
        "max-width:84em;padding:0 1em;color:#1d1d1f}",
        "h1{font-size:1.5em;margin:.2em 0} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}",
        "table{border-collapse:collapse;width:100%;margin:.5em 0}",
        "th,td{border-bottom:1px solid #e6e6e6;padding:.3em .5em;text-align:left;vertical-align:top}",
        "th{background:#f6f6f6;cursor:pointer;white-space:nowrap}",
        "td.num,th.num{text-align:right;white-space:nowrap}",
        "code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}",
        "pre{background:#f7f7f7;padding:.6em;overflow-x:auto;white-space:pre-wrap;max-height:30em}",
        ".status{font-weight:600;white-space:nowrap} .pass,.passed,.clean,.ok{color:#17803d}",
        ".fail,.failed,.findings{color:#c62828} .error,.timeout{color:#b71c1c}",
        ".not-implemented,.not_implemented{color:#8e24aa} .not-provided,.skipped,.muted{color:#777}",
        ".incomplete,.not_checked{color:#00838f}",
        ".cards{display:flex;flex-wrap:wrap;gap:.8em;margin:1em 0}",
        ".card{border:1px solid #ddd;border-radius:6px;padding:.5em .9em;min-width:8em}",
        ".card .label{font-size:.8em;color:#666;text-transform:uppercase}",
        ".card .value{font-size:1.35em;font-weight:600}",
        ".banner{padding:.6em 1em;border-radius:6px;margin:.6em 0}",
        ".banner.bad{background:#fdecea;color:#8b1a1a} .banner.warn{background:#fff7e0;color:#7a5200}",
        ".banner.intake{background:#eef3fb;color:#23395d}",
        "details{margin:.4em 0} summary{cursor:pointer} .cause{color:#6d4c00}",
        "footer{margin-top:2em;color:#888;font-size:.85em}",
    )
)

#: Sortable tables: click a header. Also marks the page as rendered by a
#: script-capable browser (the browser tests check data-rendered).
SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';
      function key(r){ var c = r.cells[col]; var v = c ? (c.dataset.sort || c.textContent) : '';
        var n = parseFloat(v); return isNaN(n) ? v.toLowerCase() : n; }
      rows.sort(function(a, b){ var x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
document.documentElement.dataset.rendered = document.querySelectorAll('table').length;
"""


def esc(value: Any) -> str:
    return html.escape(str(value if value is not None else ""), quote=True)


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
        f"<footer>lmspec {esc(__version__)}: static page, no server needed.</footer>\n"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def likely_cause(explanation: str) -> str:
    """The "likely cause" a failure names (several joined with "; "), or ""."""
    causes = []
    for cause in _CAUSE.findall(explanation or ""):
        cause = cause.strip()
        if cause.endswith(")") and cause.count(")") > cause.count("("):
            cause = cause[:-1].rstrip()  # the "(likely cause: ...)" wrapping of a one-line summary
        causes.append(cause)
    return "; ".join(causes)


def status_class(status: Any) -> str:
    return str(status).replace(" ", "-")


def pts(x: Any) -> str:
    if isinstance(x, int | float) and not isinstance(x, bool):
        return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0")
    return esc(x)


def card(label: str, value: Any, ident: str, css: str = "") -> str:
    return (
        f'<div class="card"><div class="label">{esc(label)}</div>'
        f'<div class="value {css}" id="{ident}">{esc(value)}</div></div>'
    )


def _strict_cell(item: dict[str, Any]) -> tuple[str, str]:
    strict = item.get("strict")
    if not strict or strict.get("status") in ("not implemented", "not provided"):
        return "-", "muted"
    bad = sum(t.get("outcome") in ("failed", "error", "timeout") for t in strict.get("tests") or [])
    if not bad:
        return "ok", "ok"
    return f"{bad} finding{'s' if bad != 1 else ''}", "fail"


def _item_row(item: dict[str, Any], spec_href: str) -> str:
    iid = item["id"]
    scored = item.get("group") in ("core", "extended")
    points = f"{pts(item.get('points'))}/{pts(item.get('max_points'))}" if scored else "-"
    strict, strict_css = _strict_cell(item)
    explanation = item.get("explanation") or ""
    return (
        f'<tr id="item-{esc(iid)}" data-item="{esc(iid)}" data-status="{esc(item.get("status"))}">'
        f'<td><a href="{esc(spec_href)}#{esc(iid)}">{esc(iid)}</a></td><td>{esc(item.get("title"))}</td>'
        f'<td class="status {status_class(item.get("status"))}">{esc(item.get("status"))}</td>'
        f'<td class="num points" data-sort="{esc(item.get("points"))}">{points}</td>'
        f'<td class="{strict_css}">{esc(strict)}</td>'
        f"<td>{esc(explanation[:600])}</td>"
        f'<td class="cause">{esc(likely_cause(explanation))}</td></tr>'
    )


def _test_rows(tests: list[dict[str, Any]]) -> str:
    shown = [t for t in tests if t.get("outcome") not in ("passed", "skipped")][:TESTS_SHOWN]
    rows = []
    for t in shown:
        message = str(t.get("message") or "")
        if len(message) > MESSAGE_CAP:
            message = message[:MESSAGE_CAP] + f"\n... ({len(message) - MESSAGE_CAP} more characters in results.json)"
        rows.append(
            f"<tr><td><code>{esc(str(t.get('nodeid', '')).split('::', 1)[-1])}</code></td>"
            f'<td class="status {status_class(t.get("outcome"))}">{esc(t.get("outcome"))}</td>'
            f'<td class="num">{float(t.get("duration_s") or 0):.2f} s</td>'
            f"<td><pre>{esc(message)}</pre></td></tr>"
        )
    if not rows:
        return ""
    more = len([t for t in tests if t.get("outcome") not in ("passed", "skipped")]) - len(shown)
    extra = f"<p class='muted'>{more} more in results.json</p>" if more > 0 else ""
    return (
        "<table><thead><tr><th>test</th><th>outcome</th><th class='num'>time</th><th>message</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{extra}"
    )


def _details(items: list[dict[str, Any]], spec_href: str) -> str:
    parts = []
    for item in items:
        if item.get("status") in ("pass", "skipped", "not provided"):
            continue
        table = _test_rows(item.get("tests") or [])
        if not table:
            continue
        iid = item["id"]
        parts.append(
            f'<details id="details-{esc(iid)}"><summary><a href="{esc(spec_href)}#{esc(iid)}">{esc(iid)}</a> '
            f'{esc(item.get("title"))}: <span class="status {status_class(item.get("status"))}">'
            f"{esc(item.get('status'))}</span></summary>{table}</details>"
        )
    return "".join(parts) or "<p class='muted'>Every scored item passed.</p>"


def _strict_section(items: list[dict[str, Any]], spec_href: str) -> str:
    parts = []
    for item in items:
        strict = item.get("strict")
        if not strict or strict.get("status") in ("pass", "skipped", "not implemented", "not provided"):
            continue
        iid = item["id"]
        parts.append(
            f'<details class="strict-finding" data-item="{esc(iid)}"><summary><a href="{esc(spec_href)}#{esc(iid)}">'
            f"{esc(iid)}</a>: {esc(strict.get('explanation'))}</summary>{_test_rows(strict.get('tests') or [])}"
            "</details>"
        )
    if not parts:
        return "<p class='muted'>No STRICT findings.</p>"
    return (
        "<p>Behaviour beyond the course's contract: reported, never scored.</p>"
        f"<p>Items with findings: <span id='strict-count'>{len(parts)}</span></p>" + "".join(parts)
    )


def _audit_section(data: dict[str, Any]) -> str:
    findings = data.get("audit") or []
    status = data.get("audit_status")
    head = f"<p>Status: <span id='audit-status' class='{status_class(status)}'>{esc(status)}</span></p>"
    if not findings:
        return head
    rows = "".join(
        f"<tr><td><code>{esc(f.get('function'))}</code></td><td>{esc(f.get('kind'))}</td>"
        f"<td><code>{esc(f.get('where'))}</code></td><td>{esc(f.get('adapter_function'))}</td>"
        f"<td>{esc(f.get('source'))}</td></tr>"
        for f in findings
    )
    return head + (
        "<table class='sortable'><thead><tr><th>function</th><th>kind</th><th>where</th><th>during</th>"
        f"<th>source</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _timings_section(data: dict[str, Any]) -> str:
    t = data.get("timings") or {}
    if not t:
        return f"<p>Total: {float(data.get('duration_s') or 0):.1f} s (no breakdown recorded).</p>"
    rows = "".join(
        f"<tr><td>{esc(label)}</td><td class='num'>{float(t[key]):.2f} s</td></tr>"
        for label, key in PHASES
        if isinstance(t.get(key), int | float)
    )
    per_item = t.get("per_item_s") or {}
    items = "".join(f"<tr><td>{esc(k)}</td><td class='num'>{float(v):.2f} s</td></tr>" for k, v in per_item.items())
    starts = ", ".join(f"{float(x):.2f}" for x in t.get("worker_startups_s") or [])
    return (
        "<table><thead><tr><th>phase (wall clock)</th><th class='num'>time</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f"<p>Worker starts: {len(t.get('worker_startups_s') or [])} ({esc(starts)} s). Tests' own time, summed over "
        f"the judge's processes: {float(t.get('tests_summed_s') or 0):.2f} s, of which Hypothesis shrinking "
        f"{float(t.get('shrinking_s') or 0):.2f} s and timeouts {float(t.get('timeouts_s') or 0):.2f} s.</p>"
        + (
            "<details><summary>per item</summary><table class='sortable'><thead><tr><th>item</th>"
            f"<th class='num'>tests' time</th></tr></thead><tbody>{items}</tbody></table></details>"
            if items
            else ""
        )
    )


def render_report(data: dict[str, Any], *, spec_href: str = "spec.html") -> str:
    """report.html of one results.json (a dict)."""
    impl = data.get("implementation") or {}
    name = impl.get("name") or "submission"
    items = data.get("items") or []
    origin = impl.get("adapter") or impl.get("origin")
    body = [f"<header><h1>lmspec grade: {esc(name)}</h1><p><code>{esc(origin)}</code>"]
    body.append(
        f" graded {esc(data.get('started'))}, profile {esc(data.get('profile') or 'cs336')}, "
        f"sandbox {esc(data.get('sandbox'))}</p></header>"
    )
    body += _summary_cards(data)
    body += _banners(data)
    body += _items_section(items, spec_href)
    body.append(f'<section id="failures"><h2>Failures, item by item</h2>{_details(items, spec_href)}</section>')
    body.append(f'<section id="strict"><h2>STRICT findings</h2>{_strict_section(items, spec_href)}</section>')
    body.append(f'<section id="audit-section"><h2>From-scratch audit</h2>{_audit_section(data)}</section>')
    body += _faults_section(data.get("faults") or [])
    body.append(f'<section id="timings"><h2>Timings</h2>{_timings_section(data)}</section>')
    batch = data.get("batch")
    if batch:
        rows = "".join(f"<tr><td>{esc(k)}</td><td><code>{esc(v)}</code></td></tr>" for k, v in batch.items())
        body.append(f'<section id="batch"><h2>Batch</h2><table><tbody>{rows}</tbody></table></section>')
    return page(f"lmspec: {name}", "\n".join(body))


def _summary_cards(data: dict[str, Any]) -> list[str]:
    verdict = data.get("verdict") or ("PASS" if data.get("passed") else "FAIL")
    body = ['<section id="summary" class="cards">']
    body.append(card("score", f"{pts(data.get('score'))}/{pts(data.get('max_score'))}", "score"))
    body.append(card("percent", f"{float(data.get('percent') or 0):.1f}%", "percent"))
    if data.get("extended_max_score"):
        body.append(
            card("extended", f"{pts(data.get('extended_score'))}/{pts(data.get('extended_max_score'))}", "extended")
        )
    if data.get("incomplete"):
        body.append(card("not checked", f"{pts(data.get('not_checked_points'))} points", "not-checked", "incomplete"))
    body.append(card("verdict", verdict, "verdict", verdict.lower() if verdict != "FAIL" else "fail"))
    body.append(card("STRICT findings", data.get("strict_findings", 0), "strict-findings"))
    body.append(card("audit", data.get("audit_status"), "audit", status_class(data.get("audit_status"))))
    body.append(card("time", f"{float(data.get('duration_s') or 0):.1f} s", "duration"))
    body.append("</section>")
    if data.get("chapters_line"):  # the verdict covers the chapters started (gpt2: the book's)
        body.append(f'<p id="chapters">by chapter: {esc(data["chapters_line"])}</p>')
    return body


def _banners(data: dict[str, Any]) -> list[str]:
    """The grader's error, a compromised run, what intake left out, warnings."""
    body = []
    if data.get("error"):
        body.append(f'<p class="banner bad" id="error">ERROR: {esc(data["error"])}</p>')
    if data.get("compromised"):
        reasons = "".join(f"<li>{esc(r)}</li>" for r in data.get("compromised_reasons") or [])
        body.append(
            '<div class="banner bad" id="compromised">COMPROMISED: the results cannot be trusted'
            f"<ul>{reasons}</ul></div>"
        )
    taken = (data.get("implementation") or {}).get("intake") or {}
    body += [f'<p class="banner intake">intake: {esc(line)}</p>' for line in taken.get("summary") or []]
    body += [f'<p class="banner warn warning">warning: {esc(warning)}</p>' for warning in data.get("warnings") or []]
    return body


def _items_section(items: list[dict[str, Any]], spec_href: str) -> list[str]:
    """One table per group of items (core, extended, ...)."""
    body = ['<section id="items"><h2>Items</h2>']
    for group, title in _GROUP_TITLES.items():
        rows = [_item_row(i, spec_href) for i in items if i.get("group") == group]
        if not rows:
            continue
        body.append(
            f"<h3>{esc(title)}</h3><table class='sortable items' data-group='{group}'><thead><tr><th>item</th>"
            "<th>title</th><th>status</th><th class='num'>points</th><th>STRICT</th><th>explanation</th>"
            f"<th>likely cause</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    body.append("</section>")
    return body


def _faults_section(faults: list[dict[str, Any]]) -> list[str]:
    if not faults:
        return []
    rows = "".join(
        f"<tr><td><code>{esc(f.get('key'))}</code></td><td>{esc(f.get('fault'))}</td><td>{esc(f.get('detail'))}</td></tr>"
        for f in faults
    )
    return [
        '<section id="faults"><h2>Faults of the submission\'s process</h2><table><thead><tr><th>call</th>'
        f"<th>fault</th><th>detail</th></tr></thead><tbody>{rows}</tbody></table></section>"
    ]
