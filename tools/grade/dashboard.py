"""``dashboard.html``: a batch at a glance, for course staff (a static page
beside the submissions' folders in ``--out``).

- the score histogram (matplotlib, inline SVG) and the numbers behind it;
- the pass rate of every spec item over the submissions that ran it;
- clusters of submissions that share a failure signature: the item and its
  likely cause (else the failing test and the first line of its failure),
  normalised (numbers, quoted values, paths, addresses and test parameters
  blanked) so that one bug in different submissions groups together, and
  each class of mistake can be answered once;
- the slowest submissions, and every submission with a link to its report.
"""

import io
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from lmspec.conformance import profiles
from lmspec.tools.grade.html import card, esc, likely_cause, page, pts, status_class

#: Statuses that are no failure of the submission's (nothing to cluster).
QUIET = ("pass", "skipped", "not provided")
BINS = tuple(range(0, 101, 10))  # score histogram: [0,10), ..., [90,100]
_NORMALISE = (
    (re.compile(r"\[[^\]]*\]"), "[…]"),  # test parameters ([cpu-float32]), indices, lists
    (re.compile(r"(?:/[\w.+-]+)+\.py(?::\d+)?"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"""b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*\""""), "<value>"),
    (re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"), "#"),
    (re.compile(r"\s+"), " "),
)
SLOWEST = 10


def normalise(text: str) -> str:
    """A failure's text with what varies between submissions blanked out."""
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text.strip().rstrip(".;:")


def signature(item: dict[str, Any]) -> str | None:
    """The failure signature of one item of a results.json, or None when it
    did not fail: "<id>: <normalised likely cause>", else the failing test
    and the normalised first line of its failure."""
    status = item.get("status")
    if status in QUIET:
        return None
    if status == "not implemented":
        return f"{item['id']}: not implemented"
    explanation = str(item.get("explanation") or "")
    cause = likely_cause(explanation)
    if cause:
        return f"{item['id']}: likely cause: {normalise(cause)}"
    test, _, first = explanation.partition(": ")
    return f"{item['id']}: {status}: {normalise(test)}: {normalise(first)[:200]}"


@dataclass
class Entry:
    """One submission of the batch: its summary row and, when it was graded,
    its results.json."""

    name: str
    row: dict[str, Any]
    results: dict[str, Any] | None = None
    report_href: str | None = None


@dataclass
class Cluster:
    signature: str
    item: str
    members: list[str] = field(default_factory=list)
    example: str = ""


def clusters(entries: list[Entry]) -> list[Cluster]:
    """Failure clusters, the largest first."""
    found: dict[str, Cluster] = {}
    for entry in entries:
        for item in (entry.results or {}).get("items") or []:
            if item.get("group") not in ("core", "extended"):
                continue
            sig = signature(item)
            if sig is None:
                continue
            cluster = found.setdefault(sig, Cluster(sig, item["id"], example=str(item.get("explanation") or "")))
            cluster.members.append(entry.name)
    return sorted(found.values(), key=lambda c: (-len(c.members), c.item, c.signature))


def pass_rates(entries: list[Entry]) -> list[tuple[str, str, int, int]]:
    """(item id, title, passed, ran) per spec item, in spec order; an item
    counts as run by a submission when it was checked: not "skipped", and
    not "not provided" (an extended item the submission does not offer)."""
    out = []
    for spec_item in (i for p in profiles.all_profiles() for i in p.items):
        passed = ran = 0
        for entry in entries:
            item = next((i for i in (entry.results or {}).get("items") or [] if i.get("id") == spec_item.id), None)
            if item is None or item.get("status") in ("skipped", "not provided"):
                continue
            ran += 1
            passed += item.get("status") == "pass"
        if ran:
            out.append((spec_item.id, spec_item.title, passed, ran))
    return out


def histogram(percents: list[float]) -> list[int]:
    """Counts per 10-point bin; 100 falls in the last bin."""
    counts = [0] * (len(BINS) - 1)
    for p in percents:
        counts[min(int(p // 10), len(counts) - 1)] += 1
    return counts


def _svg(fig: Any) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "lmspec"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]  # inline: without the XML declaration and DOCTYPE


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    return Figure(figsize=(width, height), dpi=96)


def histogram_svg(percents: list[float]) -> str:
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    ax.hist(percents, bins=list(BINS), color="#3b78c3", edgecolor="white")
    ax.set_xlabel("score (% of the core points)")
    ax.set_ylabel("submissions")
    ax.set_xlim(0, 100)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def pass_rate_svg(rates: list[tuple[str, str, int, int]]) -> str:
    fig = _figure(6.5, 0.6 + 0.22 * len(rates))
    ax = fig.add_subplot()
    labels = [r[0] for r in rates][::-1]
    values = [100.0 * r[2] / r[3] for r in rates][::-1]
    ax.barh(labels, values, color=["#2e7d32" if v == 100 else "#c62828" if v < 50 else "#f9a825" for v in values])
    ax.set_xlim(0, 100)
    ax.set_xlabel("submissions passing (%)")
    ax.tick_params(axis="y", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _percent(entry: Entry) -> float | None:
    if entry.results is None:
        return None
    return float(entry.results.get("percent") or 0.0)


def _link(entry: Entry) -> str:
    return f'<a href="{esc(entry.report_href)}">{esc(entry.name)}</a>' if entry.report_href else esc(entry.name)


def render_dashboard(
    entries: list[Entry],
    *,
    title: str = "lmspec batch",
    spec_href: str = "spec.html",
    run: dict[str, Any] | None = None,
) -> str:
    """The page; ``run`` is the batch's batch.json (workers, wall time, throughput)."""
    graded = [e for e in entries if e.results is not None]
    percents = [p for p in (_percent(e) for e in entries) if p is not None]
    body = [
        f"<header><h1>{esc(title)}</h1><p>{len(entries)} submissions. {_run_line(run)}</p></header>",
        _summary_section(entries, graded, percents),
        _histogram_section(percents),
        _pass_rate_section(graded, spec_href),
        _cluster_section(graded, {e.name: e for e in entries}, spec_href),
        _slowest_section(entries),
        _submissions_section(entries),
    ]
    return page(title, "\n".join(body))


def _summary_section(entries: list[Entry], graded: list[Entry], percents: list[float]) -> str:
    errors = [e for e in entries if e.results is None]
    passed = sum(bool(e.results.get("passed")) for e in graded)  # type: ignore[union-attr]
    cards = [
        card("submissions", len(entries), "n-submissions"),
        card("graded", len(graded), "n-graded"),
        card("not graded", len(errors), "n-errors", "fail" if errors else ""),
        card("passed", passed, "n-passed"),
        card("mean score", f"{statistics.fmean(percents):.1f}%" if percents else "-", "mean-percent"),
        card("median score", f"{statistics.median(percents):.1f}%" if percents else "-", "median-percent"),
        card("graded in this run", sum(e.row.get("reused") is False for e in entries), "n-regraded"),
    ]
    return "\n".join(['<section id="summary" class="cards">', *cards, "</section>"])


def _histogram_section(percents: list[float]) -> str:
    counts = histogram(percents)
    bins = "".join(
        f'<tr data-bin="{lo}"><td>{lo}-{hi if hi == 100 else hi - 1}%</td><td class="num">{n}</td></tr>'
        for lo, hi, n in zip(BINS, BINS[1:], counts)
    )
    parts = ['<section id="histogram"><h2>Scores</h2>']
    if percents:
        parts.append(f'<div class="plot">{histogram_svg(percents)}</div>')
    parts.append(
        "<details><summary>the numbers</summary><table id='histogram-table'><thead><tr><th>score</th>"
        f"<th class='num'>submissions</th></tr></thead><tbody>{bins}</tbody></table></details></section>"
    )
    return "\n".join(parts)


def _pass_rate_section(graded: list[Entry], spec_href: str) -> str:
    rates = pass_rates(graded)
    parts = [
        '<section id="pass-rates"><h2>Pass rate per spec item</h2><p>Over the submissions that were checked on '
        "the item (extended items: those that provide them).</p>"
    ]
    if rates:
        parts.append(f'<div class="plot">{pass_rate_svg(rates)}</div>')
    rows = "".join(
        f'<tr data-item="{esc(i)}"><td><a href="{esc(spec_href)}#{esc(i)}">{esc(i)}</a></td><td>{esc(t)}</td>'
        f'<td class="num rate" data-sort="{100.0 * p / n:.1f}">{100.0 * p / n:.1f}%</td>'
        f'<td class="num count">{p}/{n}</td></tr>'
        for i, t, p, n in rates
    )
    parts.append(
        "<table class='sortable' id='pass-rate-table'><thead><tr><th>item</th><th>title</th>"
        "<th class='num'>pass rate</th><th class='num'>passed/ran</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )
    return "\n".join(parts)


def _cluster_section(graded: list[Entry], by_name: dict[str, Entry], spec_href: str) -> str:
    rows = "".join(
        f'<tr class="cluster" data-cluster="{esc(c.item)}" data-size="{len(c.members)}">'
        f'<td class="num size">{len(c.members)}</td><td><a href="{esc(spec_href)}#{esc(c.item)}">{esc(c.item)}</a></td>'
        f'<td class="signature"><code>{esc(c.signature.split(": ", 1)[1])}</code>'
        f"<details><summary>an example</summary><pre>{esc(c.example[:1500])}</pre></details></td>"
        f'<td class="members">{", ".join(_link(by_name[m]) for m in c.members)}</td></tr>'
        for c in clusters(graded)
    )
    return (
        '<section id="clusters"><h2>Failure clusters</h2><p>Submissions that fail an item the same way '
        "(same item, same likely cause once numbers and values are blanked): answer each class of mistake once.</p>"
        "<table class='sortable' id='cluster-table'><thead><tr><th class='num'>submissions</th><th>item</th>"
        f"<th>signature</th><th>who</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _slowest_section(entries: list[Entry]) -> str:
    slow = sorted(entries, key=lambda e: -float(e.row.get("duration_s") or 0))[:SLOWEST]
    rows = "".join(
        f'<tr><td>{_link(e)}</td><td class="num duration">{float(e.row.get("duration_s") or 0):.1f} s</td>'
        f"<td>{esc(e.row.get('worker'))}</td></tr>"
        for e in slow
    )
    return (
        "<section id='slowest'><h2>Slowest submissions</h2><table id='slowest-table'><thead><tr><th>submission</th>"
        f"<th class='num'>grading time</th><th>worker</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _submissions_section(entries: list[Entry]) -> str:
    rows = "".join(_submission_row(e) for e in entries)
    return (
        "<section id='submissions'><h2>Every submission</h2><table class='sortable' id='submission-table'><thead><tr>"
        "<th>submission</th><th class='num'>score</th><th class='num'>percent</th><th>verdict</th>"
        "<th class='num'>STRICT</th><th>audit</th><th class='num'>time</th><th>note</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _run_line(run: dict[str, Any] | None) -> str:
    if not run:
        return ""
    line = f"This run ({esc(run.get('started'))}): {run.get('graded', 0)} graded, {run.get('reused', 0)} reused"
    if run.get("grading_wall_s"):
        line += (
            f", in <span id='grading-wall'>{float(run['grading_wall_s']):.0f}</span> s on {run.get('workers')} "
            f"workers (<span id='per-hour'>{float(run['per_hour']):.0f}</span> submissions/hour)"
        )
    return line + "."


def _submission_row(e: Entry) -> str:
    r = e.results
    if r is None:
        return (
            f'<tr data-name="{esc(e.name)}"><td>{_link(e)}</td><td class="num">-</td><td class="num">-</td>'
            f'<td class="status error">not graded</td><td></td><td></td><td class="num">'
            f"{float(e.row.get('duration_s') or 0):.1f} s</td><td>{esc(e.row.get('error'))}</td></tr>"
        )
    verdict = "pass" if r.get("passed") else "fail"
    note = r.get("error") or ("COMPROMISED" if r.get("compromised") else "")
    return (
        f'<tr data-name="{esc(e.name)}"><td>{_link(e)}</td>'
        f'<td class="num score">{pts(r.get("score"))}/{pts(r.get("max_score"))}</td>'
        f'<td class="num percent">{float(r.get("percent") or 0):.1f}</td>'
        f'<td class="status {status_class(verdict)}">{verdict}</td><td class="num">{r.get("strict_findings", 0)}</td>'
        f'<td class="{status_class(r.get("audit_status"))}">{esc(r.get("audit_status"))}</td>'
        f'<td class="num">{float(e.row.get("duration_s") or r.get("duration_s") or 0):.1f} s</td>'
        f"<td>{esc(note)}</td></tr>"
    )
