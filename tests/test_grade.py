"""Meta-tests of the grader (tools/grade) and of the judge's report
(conformance/report.py): statuses, STRICT beside the score, points, the
report formats, the MANIFEST check, bad arguments, batch mode, the sandbox
switch, and a CS336-style repository graded as it is. Hostile submissions
are tests/test_hostile.py.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from grader_run import run_grader, small_batch

from lmspec.conformance.outcomes import Outcome
from lmspec.conformance.report import summary
from lmspec.conformance.target import Target
from lmspec.tools.grade import files, points, results
from lmspec.tools.grade.report import render_table, write_gradescope, write_junit

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "grader_fixtures"
SMALL_SUITE = FIXTURES / "suite_small.py"
STUDENT_REPO = REPO / "tests" / "fixture_repos" / "cs336_student"


# --- scoring rules (no subprocess) ------------------------------------------------------------
def _t(outcome: str, message: str = "", strength: str = "must", spec: str = "2.rope") -> results.TestResult:
    return results.TestResult(
        f"conformance/cs336/test_x.py::test_{outcome}", spec, strength, Outcome(outcome), message, message
    )


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        (["passed", "passed"], "pass"),
        (["passed", "failed"], "fail"),
        (["failed", "timeout"], "timeout"),
        (["timeout", "error"], "error"),
        (["not_implemented", "not_implemented"], "not implemented"),
        (["passed", "not_implemented"], "not implemented"),  # a part absent, not wrong
        (["failed", "not_implemented"], "fail"),
        (["skipped", "skipped"], "skipped"),
        (["passed", "skipped"], "pass"),
    ],
)
def test_item_status_rules(outcomes: list[str], status: str) -> None:
    """An item's status follows the documented precedence (tools/grade/results.py)."""
    tests = [_t(o, f"{o} because") for o in outcomes]
    assert results.verdict(tests, extended=False, audit=False).status == status


def test_extended_not_provided_and_audit_partial() -> None:
    """Extended items are "not provided"; a partly-run audit with no finding passes."""
    assert results.verdict([_t("not_provided", "not provided: x")], extended=True, audit=False).status == "not provided"
    assert results.verdict([_t("passed"), _t("not_implemented")], extended=False, audit=True).status == "pass"


def _judge(tests: list[dict], **extra) -> dict:
    return {"tests": tests, "sandbox": "bwrap", "compromised": [], "warnings": [], "faults": [], **extra}


def _record(nodeid: str, spec: str, outcome: str, strength: str = "must", message: str = "") -> dict:
    return {
        "nodeid": nodeid,
        "spec": spec,
        "strength": strength,
        "outcome": outcome,
        "message": message,
        "summary": summary(message),
    }


def _report(judge: dict, **kwargs) -> results.GradeReport:
    import datetime

    return results.build_report(
        judge,
        points=points.PointsTable(),
        target=Target("x.py", "/x/x.py", None, "x", "cs336"),
        started=datetime.datetime.now(datetime.UTC),
        duration_s=1.0,
        settings={},
        **kwargs,
    )


def test_strict_failures_never_change_the_score_or_verdict(tmp_path: Path) -> None:
    """An item whose MUST tests pass keeps its points and the verdict stays PASS
    however its STRICT tests fare; the STRICT result is reported in every format."""
    judge = _judge(
        [
            _record("t::test_linear", "2.linear", "passed"),
            _record(
                "t::test_linear_any_dims", "2.linear", "failed", "strict", "AssertionError: 1-D input\nlikely cause: x"
            ),
        ]
    )
    report = _report(judge)
    item = report.items[0]
    assert item.status == "pass" and item.points == item.max_points == 1
    assert item.strict is not None and item.strict.status == "fail"
    assert report.passed and report.score == report.max_score
    assert len(report.strict_findings()) == 1
    table = render_table(report, width=160)
    assert "STRICT findings" in table and "1 finding" in table and "likely cause: x" in table
    data = report.to_json()
    assert data["strict_findings"] == 1 and data["items"][0]["strict"]["status"] == "fail"
    write_junit(report, tmp_path / "j.xml")
    strict_case = ET.parse(tmp_path / "j.xml").getroot().find(".//testcase[@classname='2.linear.strict']")
    assert strict_case is not None and strict_case.find("skipped").get("type") == "strict-finding"
    assert ET.parse(tmp_path / "j.xml").getroot().get("failures") == "0"
    write_gradescope(report, tmp_path / "g.json")
    gs = json.loads((tmp_path / "g.json").read_text())
    entry = next(t for t in gs["tests"] if t["number"] == "2.linear")
    assert entry["score"] == 1 and "STRICT" in entry["output"]


def test_lazy_import_failure_is_one_problem() -> None:
    """A package failing inside every adapter call is reported once, as an import problem."""
    message = "ModuleNotFoundError: No module named 'cs336_basics.model'"
    judge = _judge([_record(f"t::test_{i}", i, "failed", message=message) for i in ("2.linear", "2.silu", "2.rope")])
    report = _report(judge)
    assert report.error == f"the implementation fails to import inside every adapter call: {message}"


def test_summary_keeps_the_likely_cause() -> None:
    """The one-line explanation carries the likely cause when the failure names one."""
    message = "AssertionError: RoPE rotation: max |error| 0.8\n  input: x\n  likely cause: half-split rotation"
    assert summary(message) == "AssertionError: RoPE rotation: max |error| 0.8 (likely cause: half-split rotation)"


def test_points_table_matches_the_handout_and_loads_overrides(tmp_path: Path) -> None:
    """Core points sum to the handout's 62 code points; --points files override and validate."""
    table = points.PointsTable()
    from lmspec.conformance.profiles.cs336 import ITEMS

    assert sum(table[i.id] for i in ITEMS if not i.extended) == 62
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"points": {"2.rope": 4}, "partial_credit": True}))
    loaded = points.load_points(f)
    assert loaded["2.rope"] == 4 and loaded.partial_credit and loaded["2.mha"] == 5
    f.write_text(json.dumps({"9.nope": 1}))
    with pytest.raises(points.PointsFileError, match=r"9\.nope"):
        points.load_points(f)


def test_manifest_verification(tmp_path: Path) -> None:
    """MANIFEST lines 'sha256  path' are checked; no MANIFEST means nothing to check."""
    assert files.verify_manifest(tmp_path) is None
    (tmp_path / "a.npz").write_bytes(b"abc")
    digest = files.sha256_file(tmp_path / "a.npz")
    (tmp_path / "MANIFEST").write_text(f"# sha256  path  generator\n{digest}  a.npz  tools.x seed=0\n")
    assert files.verify_manifest(tmp_path) == []
    (tmp_path / "a.npz").write_bytes(b"abd")
    assert files.verify_manifest(tmp_path) == ["a.npz does not match its MANIFEST sha256"]


# --- end to end --------------------------------------------------------------------------------
@pytest.mark.slow
def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    """The grader's own failures (unknown spec id, bad points file, no bubblewrap
    for --sandbox bwrap) exit with status 2."""
    rc, output, _ = run_grader(tmp_path / "a", "--spec", "9.nothing")
    assert rc == 2 and "9.nothing" in output
    bad = tmp_path / "points.json"
    bad.write_text('{"2.rope": -1}')
    rc, output, _ = run_grader(tmp_path / "b", "--points", str(bad))
    assert rc == 2 and "2.rope" in output
    no_bwrap = without_bwrap()
    rc, output, _ = run_grader(tmp_path / "c", "--sandbox", "bwrap", "--spec", "2.linear", env=no_bwrap)
    assert rc == 2 and "bubblewrap" in output


def without_bwrap() -> dict[str, str | None]:
    """An environment change for run_grader: no bwrap on PATH, and not the CI
    switch (LMSPEC_REQUIRE_BWRAP) that turns a missing bwrap into an error."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "bwrap").exists())
    return {"PATH": path, "LMSPEC_REQUIRE_BWRAP": None}


@pytest.mark.slow
def test_without_bubblewrap_auto_runs_unsandboxed_and_says_so(tmp_path: Path) -> None:
    """--sandbox auto with no bwrap on PATH grades anyway, with a loud warning
    in the table and in results.json; --sandbox none says so too."""
    no_bwrap = without_bwrap()
    rc, output, _ = run_grader(tmp_path / "auto", "--spec", "2.linear", "--jobs", "1", env=no_bwrap)
    data = json.loads((tmp_path / "auto" / "results.json").read_text())
    assert rc == 0, output
    assert data["sandbox"] == "none" and any("NOT SANDBOXED" in w for w in data["warnings"]), data["warnings"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.grade",
            "--out",
            str(tmp_path / "none"),
            "--spec",
            "2.linear",
            "--sandbox",
            "none",
            "--jobs",
            "1",
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0 and "WITHOUT a sandbox" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
def test_cs336_style_repository_grades_full_without_setup(tmp_path: Path) -> None:
    """A repository laid out like a CS336 checkout (its package reads its own
    metadata, a conftest.py that needs Python 3.12, adapters importing
    tests.common, a package of its own called tools, an adapter that pops from
    its weights dict) gets the full score, nothing installed."""
    repo = tmp_path / "alice-cs336"
    shutil.copytree(STUDENT_REPO, repo)
    rc, output, _ = run_grader(tmp_path / "out", "--adapter", str(repo / "tests" / "adapters.py"), "--jobs", "2")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    failing = [
        (i["id"], i["status"], i["explanation"])
        for i in data["items"]
        if i["group"] == "core" and i["status"] != "pass"
    ]
    assert not failing, f"{failing}\n{output}"
    assert data["score"] == data["max_score"] == 62 and rc == 0, output
    assert data["implementation"]["metadata"].startswith("cs336_basics 1.0.6"), data["implementation"]
    assert not data["compromised"]


@pytest.mark.slow
def test_small_suite_formats_and_batch(shared_gradings: Path) -> None:
    """Batch mode on the stand-in suite: a row per submission, formats written, no adapter = 0.
    (The batch is grader_run.small_batch, graded once per run: test_html reads its dashboard.)"""
    rc, output, out = small_batch(shared_gradings)
    assert rc == 1, output
    with open(out / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"alice", "bob", "carol", "dave"}
    assert rows["alice"]["passed"] == "True" and float(rows["alice"]["score"]) == float(rows["alice"]["max_score"]), (
        rows
    )
    assert rows["bob"]["passed"] == "False" and rows["bob"]["items_not_implemented"] == "3"
    assert "no adapters file found" in rows["carol"]["error"]
    alice = json.loads((out / "alice" / "results.json").read_text())
    assert {i["id"]: i["status"] for i in alice["items"]}["4.generation"] == "not provided"
    junit = ET.parse(out / "alice" / "junit.xml").getroot()
    assert junit.tag == "testsuites" and int(junit.get("tests")) == 11
    gs = json.loads((out / "bob" / "gradescope_results.json").read_text())
    assert {t["number"] for t in gs["tests"]} >= {"2.softmax", "2.linear"} and gs["score"] == 0


# --- real repositories: their own needs --------------------------------------------------------
def _copy_checkout(dest: Path) -> Path:
    """lmspec's checkout as a fresh clone would have it (tracked and new files),
    with nothing beside it: no ../shared/fixtures."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for rel in listed:
        source = REPO / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    return dest


@pytest.mark.slow
def test_declared_dependency_needs_an_environment_of_its_own(tmp_path: Path) -> None:
    """A repository declaring a dependency the grader lacks (heapdict): with
    --env none a placeholder stands for it (2.silu does not use it and
    passes; 2.softmax does, and fails saying so) and a warning says --env
    auto installs it; with --env auto it gets
    a cached environment with it, on the grader's torch, and passes."""
    repo = tmp_path / "dep-repo"
    shutil.copytree(REPO / "tests" / "fixture_repos" / "needs_dependency", repo)
    adapter = str(repo / "tests" / "adapters.py")
    rc, output, _ = run_grader(tmp_path / "none", "--adapter", adapter, "--spec", "2.silu,2.softmax", "--jobs", "1")
    data = json.loads((tmp_path / "none" / "results.json").read_text())
    assert rc == 1 and data["error"] is None, output
    statuses = {i["id"]: (i["status"], i["explanation"]) for i in data["items"] if i["id"] in ("2.silu", "2.softmax")}
    assert statuses["2.silu"][0] == "pass", statuses  # does not use heapdict
    assert statuses["2.softmax"][0] in ("fail", "error"), statuses  # run_softmax calls heapdict
    assert "heapdict is not installed where lmspec ran" in statuses["2.softmax"][1], statuses
    assert data["implementation"]["intake"]["placeholders"] == {"heapdict": "heap_tools/__init__.py:5"}
    advice = [w for w in data["warnings"] if w.startswith("heapdict is declared in the repository's pyproject.toml")]
    assert advice and "--env auto installs it" in advice[0], data["warnings"]
    cache = tmp_path / "envs"
    args = (
        "--adapter",
        adapter,
        "--spec",
        "2.silu,2.softmax",
        "--jobs",
        "1",
        "--env",
        "auto",
        "--env-cache",
        str(cache),
    )
    rc, output, _ = run_grader(tmp_path / "auto", *args)
    data = json.loads((tmp_path / "auto" / "results.json").read_text())
    assert rc == 0 and data["score"] == data["max_score"] > 0, output
    environment = data["implementation"]["environment"]
    assert environment["installed"] == ["heapdict>=1.0.1"], environment
    assert any(n.startswith("torch~=2.6.0: graded with the grader's torch") for n in environment["notes"]), environment
    rc, output, _ = run_grader(tmp_path / "again", *args)
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert rc == 0 and again["implementation"]["environment"].get("cached") is True, output


@pytest.mark.slow
def test_newer_python_requirement_is_graded_with_the_exact_reason(tmp_path: Path) -> None:
    """A 2026 checkout needs Python 3.12 (SPEC §5): with no matching
    interpreter that has torch, it is graded on ours, with a warning in
    results.json (and the table, which prints the report's warnings), and
    its import failure is its error with the exact reason and the fix (exit
    1, never without results.json); an interpreter given with --python that
    lacks torch is the grader's setup (exit 2)."""
    repo = tmp_path / "cs336-2026"
    shutil.copytree(REPO / "tests" / "fixture_repos" / "cs336_2026", repo)
    adapter = str(repo / "tests" / "adapters.py")
    no_python = {"PATH": "/usr/bin:/bin", "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    rc, output, _ = run_grader(tmp_path / "a", "--adapter", adapter, "--spec", "2.silu", env=no_python)
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    assert rc == 1 and not data["passed"], output
    assert "uses PEP 695 syntax" in data["error"] and "needs Python >= 3.12" in data["error"], data["error"]
    assert "cs336_basics/__init__.py:6" in data["error"] and "rerun with --python PATH" in data["error"]
    assert any("requires Python >=3.12" in w for w in data["warnings"]), data["warnings"]
    assert {i["status"] for i in data["items"]} == {"error"}
    bare = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    student = tmp_path / "cs336"
    shutil.copytree(STUDENT_REPO, student)
    rc, output, _ = run_grader(
        tmp_path / "b", "--adapter", str(student / "tests" / "adapters.py"), "--python", str(bare)
    )
    assert rc == 2 and "lacks torch" in output, output


@pytest.mark.slow
def test_fresh_clone_grades_a_repository_with_its_own_fixtures(tmp_path: Path) -> None:
    """A clone of lmspec with nothing beside it grades a CS336-style
    repository whose tests/fixtures hold the official files: no oracle test
    skipped, every file taken from the repository and verified; the handout
    edition recorded. A file changed in the repository is refused by name."""
    if not (REPO.parent / "shared" / "fixtures" / "corpus.en").is_file():
        pytest.skip("needs the official fixture files (../shared/fixtures) to plant in the repository")
    clone = _copy_checkout(tmp_path / "lmspec")
    repo = tmp_path / "alice"
    shutil.copytree(STUDENT_REPO, repo)
    shared = REPO.parent / "shared" / "fixtures"
    (repo / "tests" / "fixtures").mkdir()
    (repo / "tests" / "_snapshots").mkdir()
    for path in shared.iterdir():
        if path.suffix != ".md" and not path.name.startswith("official_adamw"):
            shutil.copy2(path, repo / "tests" / "fixtures" / path.name)
    shutil.copy2(shared / "official_adamw_expected.npz", repo / "tests" / "_snapshots" / "test_adamw.npz")
    env = {"LMSPEC_FIXTURES": None, "PYTHONPATH": str(clone)}
    adapter = str(repo / "tests" / "adapters.py")
    rc, output, _ = run_grader(tmp_path / "out", "--adapter", adapter, env=env, checkout=clone)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    skipped = [t["nodeid"] for i in data["items"] for t in i["tests"] if t["outcome"] == "skipped"]
    assert rc == 0 and data["score"] == 62, output
    assert not skipped, skipped
    fixtures = data["implementation"]["fixtures"]
    assert fixtures["used"] and {u["source"] for u in fixtures["used"].values()} == {"the graded repository"}, fixtures
    assert data["implementation"]["repository"]["handout"]["edition"] == "2025"
    (repo / "tests" / "fixtures" / "corpus.en").write_text("my own corpus\n")
    run_grader(tmp_path / "tampered", "--adapter", adapter, "--spec", "1.2.train_bpe", env=env, checkout=clone)
    data = json.loads((tmp_path / "tampered" / "results.json").read_text())
    item = next(i for i in data["items"] if i["id"] == "1.2.train_bpe")
    assert item["status"] in ("fail", "error") and "oracle file corpus.en refused" in item["explanation"], item

    assert any("corpus.en" in r for r in data["implementation"]["fixtures"]["refused"])


_LAYOUT_ITEMS = "2.linear,2.silu,2.softmax"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixture", "target", "root"),
    [
        ("cs336_monorepo", ".", "assignment1-basics"),
        ("cs336_monorepo", "assignment1-basics/tests/adapters.py", "assignment1-basics"),
        ("cs336_in_tests", ".", "."),
    ],
    ids=["monorepo-root", "monorepo-adapter", "implementation-in-tests"],
)
def test_real_repository_layouts_grade_as_they_are(tmp_path: Path, fixture: str, target: str, root: str) -> None:
    """Issue 19: a course monorepo (the assignment in a subfolder beside the
    next assignment's own tests/adapters.py, a uv workspace at the top) graded
    from its top folder or by its adapter, and an implementation living inside
    its own tests/ package (imported as tests.layers and relatively), grade as
    they are: full marks on the items they implement, the assignment's folder
    as the repository's root, its pyproject.toml read."""
    repo = tmp_path / fixture
    shutil.copytree(REPO / "tests" / "fixture_repos" / fixture, repo)
    rc, output, _ = run_grader(tmp_path / "out", str(repo / target), "--spec", _LAYOUT_ITEMS, "--jobs", "1")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rc == 0 and data["error"] is None, output
    assert data["score"] == data["max_score"] == 2.5, [(i["id"], i["status"], i["explanation"]) for i in data["items"]]
    implementation = data["implementation"]
    assert Path(implementation["root"]) == (repo / root).resolve(), implementation["root"]
    assert implementation["repository"]["requires_python"] == ">=3.11", implementation["repository"]
