"""Meta-tests of the grader's HTML pages and of its Gradescope file:
report.html (one submission), dashboard.html (a batch), spec.html (the
anchors the reports link to), each loaded in a real browser (headless
Chromium) that must show the expected numbers; the failure signatures that
cluster one bug across submissions; the Gradescope writer with per-item
visibility and a leaderboard, and the validator of Gradescope's documented
format on good and bad documents.

Without Chromium the browser tests skip with the reason, unless
LMSPEC_REQUIRE_BROWSER=1 (CI). Each browser test keeps a screenshot and
prints where (the pytest temporary folder, or $LMSPEC_ARTIFACTS).
"""

import copy
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import grader_run
import pytest

from lmspec.conformance.report import summary
from lmspec.conformance.target import Target
from lmspec.tools.grade import dashboard, gradescope, html, points, results

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "grader_fixtures"
SMALL_SUITE = FIXTURES / "suite_small.py"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


# --- a real browser -------------------------------------------------------------------------------
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found:
        return found
    reason = "no Chromium on PATH (Debian: apt-get install -y chromium)"
    if os.environ.get("LMSPEC_REQUIRE_BROWSER") == "1":
        pytest.fail(f"LMSPEC_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture
def artifacts(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    root = os.environ.get("LMSPEC_ARTIFACTS")
    folder = Path(root) / request.node.name if root else tmp_path / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def browse(page: Path, artifacts: Path, tmp_path: Path) -> "Dom":
    """Load ``page`` in headless Chromium: its DOM after the page's script
    ran, and a screenshot kept in ``artifacts``."""
    exe = chromium()
    profile = tmp_path / f"chromium-profile-{page.stem}"
    base = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    dom = subprocess.run(
        [*base, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120, check=False
    )
    assert dom.returncode == 0 and "<html" in dom.stdout, dom.stderr[-3000:]
    shot = artifacts / f"{page.parent.name}-{page.stem}.png"
    subprocess.run(
        [*base, "--window-size=1280,2400", f"--screenshot={shot}", page.resolve().as_uri()],
        capture_output=True,
        timeout=120,
        check=False,
    )
    print(f"screenshot of {page}: {shot}")
    assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot of {page}"
    return Dom(dom.stdout)


class Dom(HTMLParser):
    """The text of every element with an id, and every element carrying a
    data-* attribute (with its text), from a DOM dump."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr"})

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str], list[str]]] = []
        self.by_id: dict[str, str] = {}
        self.tagged: list[tuple[str, dict[str, str], str]] = []
        self.root_attrs: dict[str, str] = {}
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.root_attrs = values
        if tag not in self.VOID:
            self.stack.append((tag, values, []))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            name, attrs, text = self.stack.pop()
            content = " ".join("".join(text).split())
            if "id" in attrs:
                self.by_id[attrs["id"]] = content
            if any(k.startswith("data-") for k in attrs):
                self.tagged.append((name, attrs, content))
            if self.stack:
                self.stack[-1][2].append(f" {''.join(text)} ")  # cells and blocks read as separate words
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.stack:
            self.stack[-1][2].append(data)

    def rows(self, attr: str) -> dict[str, str]:
        return {a[attr]: text for name, a, text in self.tagged if name == "tr" and attr in a}


# --- a synthetic graded report ----------------------------------------------------------------------
def _record(nodeid: str, spec: str, outcome: str, strength: str = "must", message: str = "", **props) -> dict:
    return {
        "nodeid": nodeid,
        "spec": spec,
        "strength": strength,
        "outcome": outcome,
        "message": message,
        "summary": summary(message),
        "duration_s": 0.5,
        "props": props,
    }


ROPE_BUG = (
    "AssertionError: RoPE must rotate adjacent pairs (2k, 2k+1): input e_0 at position {p} leaks into element 2 "
    "(value {v}), d_k={d}; likely cause: matches half-split rotation (rotate-half): pairs must be adjacent (2k, 2k+1)"
)


def _report(rope_position: int = 1, *, value: str = "0.8415", d_k: int = 4) -> results.GradeReport:
    judge = {
        "tests": [
            _record("conformance/cs336/test_nn_ops.py::test_linear_matches[cpu]", "2.linear", "passed"),
            _record(
                "conformance/cs336/test_nn_ops.py::test_linear_any_dims[cpu]", "2.linear", "failed", "strict", "1-D"
            ),
            _record(
                "conformance/cs336/test_rope.py::test_rope_rotates_adjacent_pairs[cpu]",
                "2.rope",
                "failed",
                message=ROPE_BUG.format(p=rope_position, v=value, d=d_k),
            ),
            _record("conformance/cs336/test_rope.py::test_rope_identity_at_zero[cpu]", "2.rope", "passed"),
            _record(
                "conformance/cs336/test_nn_ops.py::test_softmax[cpu]",
                "2.softmax",
                "not_implemented",
                message="not implemented: run_softmax",
            ),
            _record(
                "conformance/cs336/test_audit.py::test_no_torch_nn",
                "0.from_scratch",
                "passed",
                "should",
                audit_findings=[{"function": "torch.nn.functional.softmax", "kind": "runtime call", "where": "m.py:4"}],
            ),
        ],
        "sandbox": "bwrap",
        "compromised": [],
        "warnings": ["an example warning"],
        "faults": [],
    }
    report = results.build_report(
        judge,
        points=points.PointsTable(),
        target=Target("alice/tests/adapters.py", "/alice/tests/adapters.py", None, "alice", "cs336"),
        started=datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC),
        duration_s=12.5,
        settings={},
    )
    report.timings = {"total_s": 12.5, "judge_startup_s": 1.2, "tests_wall_s": 9.0, "per_item_s": {"2.rope": 1.0}}
    return report


# --- the likely cause and failure signatures ---------------------------------------------------------
def test_likely_cause_is_read_from_both_explanation_forms() -> None:
    """A cause is found after '; likely cause:' and inside '(likely cause: ...)', keeping its own parentheses."""
    assert html.likely_cause("t: AssertionError: x; likely cause: a (2k, 2k+1)") == "a (2k, 2k+1)"
    assert html.likely_cause("AssertionError: x (likely cause: half-split (rotate-half))") == "half-split (rotate-half)"
    assert html.likely_cause("t: x; likely cause: one; likely cause: two") == "one; two"
    assert html.likely_cause("t: AssertionError: no cause named") == ""


def test_one_bug_in_different_submissions_has_one_signature() -> None:
    """Numbers, quoted values, paths and parameters differ between submissions; the signature does not."""
    a = _report(1, value="0.8415", d_k=4).to_json()
    b = _report(3, value="0.1411", d_k=8).to_json()
    rope_a = next(i for i in a["items"] if i["id"] == "2.rope")
    rope_b = next(i for i in b["items"] if i["id"] == "2.rope")
    assert rope_a["explanation"] != rope_b["explanation"]
    assert dashboard.signature(rope_a) == dashboard.signature(rope_b)
    assert dashboard.signature(rope_a).startswith("2.rope: likely cause: matches half-split rotation")
    other = copy.deepcopy(rope_a)
    other["explanation"] = (
        "test_rope_x[cpu]: AssertionError: theta 10000.0 vs 500.0; likely cause: theta exponent uses d"
    )
    assert dashboard.signature(other) != dashboard.signature(rope_a)
    assert dashboard.normalise("at /tmp/x/cs336/model.py:41 got b'ab' not 'c' (0x7f3a, 1e-5) [cpu-float32]") == (
        "at <path> got <value> not <value> (<addr>, #) […]"
    )
    assert dashboard.signature({"id": "2.rope", "status": "pass"}) is None


def _entries(n_good: int = 2) -> list[dashboard.Entry]:
    entries = []
    for k in range(3):
        data = _report(k + 1, value=f"0.{k}1", d_k=4 + 2 * k).to_json()
        entries.append(
            dashboard.Entry(f"rope{k}", {"duration_s": 10.0 + k, "worker": "w1"}, data, f"rope{k}/report.html")
        )
    for k in range(n_good):
        data = _report().to_json()
        for item in data["items"]:
            item["status"] = "pass"
        data.update(score=data["max_score"], percent=100.0, passed=True)
        entries.append(dashboard.Entry(f"good{k}", {"duration_s": 5.0, "worker": "w2"}, data, f"good{k}/report.html"))
    entries.append(dashboard.Entry("broken", {"duration_s": 0.0, "error": "no adapters.py found"}, None, None))
    return entries


def test_dashboard_numbers() -> None:
    """Histogram bins, pass rates and clusters computed from the entries."""
    entries = _entries()
    graded = [e for e in entries if e.results is not None]
    rates = {i: (p, n) for i, _, p, n in dashboard.pass_rates(graded)}
    assert rates["2.rope"] == (2, 5) and rates["2.linear"] == (5, 5) and rates["2.softmax"] == (2, 5)
    groups = dashboard.clusters(graded)
    assert [(c.item, len(c.members)) for c in groups] == [("2.rope", 3), ("2.softmax", 3)]
    assert groups[0].members == ["rope0", "rope1", "rope2"]
    percents = [e.results["percent"] for e in graded]
    assert dashboard.histogram(percents)[-1] == 2 and sum(dashboard.histogram(percents)) == 5


# --- Gradescope -----------------------------------------------------------------------------------
#: The example of Gradescope's "Output format" section (comments removed).
DOCUMENTED_EXAMPLE = {
    "score": 44.0,
    "execution_time": 136,
    "output": "Text relevant to the entire submission",
    "output_format": "simple_format",
    "test_output_format": "text",
    "test_name_format": "text",
    "visibility": "after_due_date",
    "stdout_visibility": "visible",
    "extra_data": {},
    "tests": [
        {
            "score": 2.0,
            "max_score": 2.0,
            "status": "passed",
            "name": "Your name here",
            "name_format": "text",
            "number": "1.1",
            "output": "Giant multiline string that will be placed in a <pre> tag and collapsed by default",
            "output_format": "text",
            "tags": ["tag1", "tag2", "tag3"],
            "visibility": "visible",
            "extra_data": {},
        }
    ],
    "leaderboard": [
        {"name": "Accuracy", "value": 0.926},
        {"name": "Time", "value": 15.1, "order": "asc"},
        {"name": "Stars", "value": "*****"},
    ],
}


def test_gradescope_validator_accepts_the_documented_example() -> None:
    assert gradescope.validate(DOCUMENTED_EXAMPLE) == []
    assert gradescope.validate({"tests": [{"name": "Compilation check", "status": "passed", "score": 0}]}) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(visibility="public"), "visibility: must be one of"),
        (lambda d: d["tests"][0].update(visibility="after_due"), "tests[0].visibility"),
        (lambda d: d["tests"][0].update(status="ok"), "tests[0].status: must be one of passed, failed"),
        (lambda d: d["tests"][0].update(score="2"), "tests[0].score: must be a finite number"),
        (lambda d: d["tests"][0].update(score=float("nan")), "not strict JSON"),
        (lambda d: d["tests"][0].update(tags="tag1"), "tests[0].tags: must be a list of strings"),
        (lambda d: d["tests"][0].update(points=2), "tests[0].points: not a documented test field"),
        (lambda d: d.update(output_format="markdown"), "output_format: must be one of"),
        (lambda d: d.update(tests={"a": 1}), "tests: must be a list"),
        (lambda d: d["leaderboard"][0].pop("value"), "leaderboard[0].value: required"),
        (lambda d: d["leaderboard"][1].update(order="up"), "leaderboard[1].order"),
        (lambda d: d.update(extra_data=[]), "extra_data: must be an object"),
        (lambda d: d.update(scores=1), "scores: not a documented top-level field"),
        (lambda d: (d.pop("score"), d["tests"][0].pop("score")), "score: required at the top level"),
    ],
)
def test_gradescope_validator_rejects_bad_documents(change, problem: str) -> None:
    document = copy.deepcopy(DOCUMENTED_EXAMPLE)
    change(document)
    problems = gradescope.validate(document)
    assert any(problem in p for p in problems), problems


def test_gradescope_file_with_visibility_and_leaderboard(tmp_path: Path) -> None:
    """--points sets visibility per item (id, section prefix, default) and a leaderboard; the file validates."""
    spec = {
        "points": {"2.rope": 4},
        "visibility": {"default": "after_due_date", "2": "after_published", "2.rope": "hidden", "0": "visible"},
        "leaderboard": ["score", "time"],
    }
    (tmp_path / "p.json").write_text(json.dumps(spec))
    table = points.load_points(tmp_path / "p.json")
    report = _report()
    gradescope.write_gradescope(report, tmp_path / "g.json", table)
    data = json.loads((tmp_path / "g.json").read_text())
    assert gradescope.validate(data) == []
    vis = {t["number"]: t["visibility"] for t in data["tests"]}
    assert vis == {
        "0.from_scratch": "visible",
        "2.linear": "after_published",
        "2.rope": "hidden",
        "2.softmax": "after_published",
    }
    assert data["visibility"] == "after_due_date"
    assert data["leaderboard"] == [
        {"name": "Score", "value": data["score"], "order": "desc"},
        {"name": "Grading time (s)", "value": 12.5, "order": "asc"},
    ]
    (tmp_path / "p.json").write_text(json.dumps({"leaderboard": True}))
    gradescope.write_gradescope(report, tmp_path / "g.json", points.load_points(tmp_path / "p.json"))
    assert json.loads((tmp_path / "g.json").read_text())["leaderboard"] == [
        {"name": "Score", "value": 1, "order": "desc"}
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"visibility": {"2.rope": "public"}}, "visibility of '2.rope' must be one of"),
        ({"visibility": {"9.nope": "hidden"}}, "'9.nope' is not 'default', a spec id or a prefix"),
        ({"visibility": ["hidden"]}, "'visibility' must be an object"),
        ({"leaderboard": "yes"}, "'leaderboard' must be true, false or a list"),
        ({"leaderboard": ["accuracy"]}, "'leaderboard' must be true, false or a list"),
        ({"points": {}, "visibilty": {}}, "unknown key(s) 'visibilty'"),
    ],
)
def test_points_file_gradescope_settings_are_validated(tmp_path: Path, content: dict, message: str) -> None:
    (tmp_path / "p.json").write_text(json.dumps(content))
    with pytest.raises(points.PointsFileError) as excinfo:
        points.load_points(tmp_path / "p.json")
    assert message in str(excinfo.value)


# --- the pages in a browser ---------------------------------------------------------------------------
def test_report_page_in_a_browser(tmp_path: Path, artifacts: Path) -> None:
    """report.html shows the score, every item with its status, points and likely cause, links to
    spec.html#<id>, the STRICT finding, the audit, the warning and the timings."""
    from lmspec.tools.grade.outputs import write_outputs, write_spec_page

    report = _report()
    out = tmp_path / "alice"
    write_outputs(report, out, ("json", "html"), points.PointsTable())
    write_spec_page(out)
    dom = browse(out / "report.html", artifacts, tmp_path)
    assert dom.root_attrs.get("data-rendered", "0") != "0", "the page's script did not run"
    assert dom.by_id["score"] == f"{report.score:g}/{report.max_score:g}"
    assert dom.by_id["verdict"] == "FAIL" and dom.by_id["strict-findings"] == "1"
    rows = dom.rows("data-item")
    assert rows["2.rope"].startswith("2.rope RoPE") and "fail 0/2" in rows["2.rope"]
    assert "matches half-split rotation" in rows["2.rope"] and "not implemented" in rows["2.softmax"]
    assert "1 finding" in rows["2.linear"]
    assert dom.by_id["audit-status"] == "findings" and "torch.nn.functional.softmax" in dom.by_id["audit-section"]
    assert "1.20 s" in dom.by_id["timings"]
    markup = (out / "report.html").read_text()
    assert 'href="spec.html#2.rope"' in markup and "an example warning" in markup
    spec = browse(out / "spec.html", artifacts, tmp_path)
    assert {"2.rope", "2.linear", "2.softmax", "0.from_scratch"} <= set(spec.by_id), "spec.html lacks item anchors"


def test_dashboard_page_in_a_browser(tmp_path: Path, artifacts: Path) -> None:
    """dashboard.html (synthetic batch): the counts, the histogram's numbers, pass rates, clusters, the slowest."""
    entries = _entries()
    page = tmp_path / "batch" / "dashboard.html"
    page.parent.mkdir()
    page.write_text(dashboard.render_dashboard(entries, title="course"))
    dom = browse(page, artifacts, tmp_path)
    assert dom.root_attrs.get("data-rendered", "0") != "0"
    assert dom.by_id["n-submissions"] == "6" and dom.by_id["n-graded"] == "5" and dom.by_id["n-errors"] == "1"
    assert dom.by_id["n-passed"] == "2"
    rates = dom.rows("data-item")
    assert "40.0% 2/5" in rates["2.rope"] and "100.0% 5/5" in rates["2.linear"]
    bins = dom.rows("data-bin")
    assert bins["90"].endswith(" 2") and sum(int(v.split()[-1]) for v in bins.values()) == 5
    clusters = [(a["data-cluster"], a["data-size"]) for _, a, _ in dom.tagged if "data-cluster" in a]
    assert clusters == [("2.rope", "3"), ("2.softmax", "3")]
    assert dom.by_id["slowest-table"].split()[4:6] == ["rope2", "12.0"]  # after the header
    assert "<svg" in page.read_text() and "score (% of the core points)" in page.read_text()


# --- a real batch: its dashboard and reports in a browser -------------------------------------------
@pytest.fixture(scope="module")
def small_batch(shared_gradings: Path) -> Path:
    """A real batch on the stand-in suite: two correct submissions (a folder, a single file), one
    wrong, one without an adapter (grader_run.small_batch: graded once per run, test_grade reads
    its formats)."""
    rc, output, out = grader_run.small_batch(shared_gradings)
    assert rc == 1, output
    return out


@pytest.mark.slow
def test_batch_dashboard_in_a_browser(small_batch: Path, tmp_path: Path, artifacts: Path) -> None:
    """The dashboard of a real batch shows what summary.csv and the results say."""
    with open(small_batch / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    dom = browse(small_batch / "dashboard.html", artifacts, tmp_path)
    assert dom.root_attrs.get("data-rendered", "0") != "0"
    assert dom.by_id["n-submissions"] == str(len(rows)) == "4"
    assert dom.by_id["n-graded"] == "3" and dom.by_id["n-errors"] == "1" and dom.by_id["n-passed"] == "2"
    submissions = dom.rows("data-name")
    assert "not graded" in submissions["carol"] and "no adapters file found" in submissions["carol"]
    for name in ("alice", "bob", "dave"):
        assert f"{rows[name]['score']}/{rows[name]['max_score']}" in submissions[name]
    rates = dom.rows("data-item")
    assert "66.7% 2/3" in rates["2.softmax"], rates
    clusters = dom.rows("data-cluster")
    assert "not implemented" in clusters["2.linear"] and "bob" in clusters["2.linear"]
    report = browse(small_batch / "bob" / "report.html", artifacts, tmp_path)
    assert report.by_id["score"] == f"0/{rows['bob']['max_score']}"
    assert "not implemented" in report.rows("data-item")["2.linear"]
    assert 'href="../spec.html#2.softmax"' in (small_batch / "bob" / "report.html").read_text()
    assert (small_batch / "spec.html").is_file()


def test_single_run_writes_html_and_spec(tmp_path: Path) -> None:
    """lmspec grade writes report.html and spec.html by default (format html), and a valid Gradescope file."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("LMSPEC_ADAPTER", None)
    out = tmp_path / "out"
    small = ("--suite", str(SMALL_SUITE))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.grade", str(FIXTURES / "adapter_good.py"), "--out", str(out), "--quiet", *small],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {"results.json", "junit.xml", "gradescope_results.json", "report.html", "spec.html"} <= {
        p.name for p in out.iterdir()
    }
    assert gradescope.validate(json.loads((out / "gradescope_results.json").read_text())) == []
    assert 'href="spec.html#2.softmax"' in (out / "report.html").read_text()
