"""The front door (issue 23): what is not a submission is refused in one
line naming what was given and what was expected (exit 2, nothing written);
an adapters file with a syntax error is reported once, with its file and
line, without running the suite; every mistake in the arguments is one line
naming the option and the accepted values, under the program name the user
typed."""

import ast
import json
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lmspec.tools.grade import cli

REPO = Path(__file__).resolve().parent.parent


def _grade(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lmspec grade: error: "), err
    return lines[0]


@pytest.fixture
def earlier_out(tmp_path: Path) -> Path:
    """An output folder holding an earlier grade, which a usage error must leave as it is."""
    out = tmp_path / "grade-out"
    out.mkdir()
    (out / "results.json").write_text('{"earlier": true}')
    return out


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("{tmp}/does-not-exist", "no such file or folder"),
        ("{repo}/README.md", "not a Python file"),
        ("{tmp}/empty-folder", "a folder without an adapters file"),
        ("no_such_module_anywhere", "not a file, a folder or an importable module"),
    ],
)
def test_a_bad_target_is_one_line_exit_2_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, earlier_out: Path, given: str, expected: str
) -> None:
    (tmp_path / "empty-folder").mkdir()
    given = given.format(tmp=tmp_path, repo=REPO)
    rc, out, err = _grade(capsys, given, "--out", str(earlier_out))
    line = _one_line(err)
    assert rc == 2 and not out, (rc, out)
    assert given in line and expected in line, line
    assert "expected" in line or "looked for" in line, line
    assert [p.name for p in earlier_out.iterdir()] == ["results.json"]
    assert json.loads((earlier_out / "results.json").read_text()) == {"earlier": True}


def test_a_syntax_error_is_reported_once_with_file_and_line_without_a_suite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    adapter = tmp_path / "adapters.py"
    adapter.write_text("import torch\n\n\ndef run_linear(d_in, d_out, weights, in_features:\n    return None\n")
    out = tmp_path / "out"
    rc, table, err = _grade(capsys, str(adapter), "--out", str(out), "--quiet")
    assert rc == 1, err
    data = json.loads((out / "results.json").read_text())
    assert f"{adapter}:4: SyntaxError" in data["error"], data["error"]
    assert data["implementation"]["import_error"]["line"] == 4
    assert not any(i["tests"] for i in data["items"]), "the suite ran"
    assert not (out / "logs").exists(), "the judge was started"
    rc, table, err = _grade(capsys, str(adapter), "--out", str(out))
    assert table.count("SyntaxError") == 1, table


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--jobs", "0"], "--jobs 0: expected a number of judge processes >= 1"),
        (["--jobs", "x"], "--jobs: invalid int value: 'x'"),
        (["--spec", "9.nope"], "--spec 9.nope: matches no spec item of profile cs336; expected item ids or their"),
        (["--profile", "gpt3"], "--profile gpt3: unknown profile; expected one of cs336, "),
        (["--timeout", "0"], "--timeout 0: expected a number of seconds > 0"),
        (["--sandbox", "docker"], "--sandbox: invalid choice: 'docker' (choose from"),
        (["--format", "pdf"], "--format pdf: unknown pdf; expected a comma list of table, json"),
        (["--fixtures", "{tmp}/nowhere"], "--fixtures {tmp}/nowhere: no such folder; expected a folder holding"),
        (["--fixtures", "{tmp}"], "--fixtures {tmp}: holds none of the 11 oracle files"),
    ],
)
def test_an_argument_mistake_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], named: str
) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    rc, _, err = _grade(capsys, *argv, "--out", str(tmp_path / "out"))
    line = _one_line(err)
    assert rc == 2 and named.format(tmp=tmp_path) in line, line
    assert line.endswith("(see lmspec grade --help)"), line
    assert not (tmp_path / "out").exists()


def _lmspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lmspec", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_train_bpe_mistakes_name_the_program_typed_and_an_empty_input(tmp_path: Path) -> None:
    missing = _lmspec("train-bpe", cwd=tmp_path)
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip() == (
        "error: lmspec train-bpe: the following arguments are required: input, --vocab-size, --out-dir "
        "(see lmspec train-bpe --help)"
    )
    (tmp_path / "empty.txt").write_text("")
    empty = _lmspec("train-bpe", "empty.txt", "--vocab-size", "300", "--out-dir", "tok", cwd=tmp_path)
    assert empty.returncode == 2 and "input 'empty.txt' is empty" in empty.stderr, empty.stderr
    assert not (tmp_path / "tok").exists()
    (tmp_path / "tiny.txt").write_text("ab ab")
    tiny = _lmspec("train-bpe", "tiny.txt", "--vocab-size", "300", "--out-dir", "tok", cwd=tmp_path)
    assert tiny.returncode == 0, tiny.stderr
    assert "warning: made 2 of the 43 merges asked for (--vocab-size 300)" in tiny.stderr, tiny.stderr
    # stderr is not a terminal: one line per phase, no bar frames
    assert "train-bpe: pre-tokenizing tiny.txt" in tiny.stderr and "\r" not in tiny.stderr, tiny.stderr


def test_mutants_on_an_installed_copy_says_the_catalog_ships_with_a_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lmspec.tools import mutants

    monkeypatch.setattr(mutants, "MUTANTS_DIR", tmp_path / "site-packages" / "lmspec" / "tests" / "mutants")
    rc = mutants.main([])
    err = capsys.readouterr().err
    assert rc == 2 and "ships only with a checkout" in err and len(err.strip().splitlines()) == 1, err


# --- what could not be checked, counts, explanations (issue 23) ---------------------------------
NOT_CHECKED = (
    "not checked: oracle file gpt2_vocab.json not found; looked in: --fixtures (not given). Point --fixtures "
    "(or LMSPEC_FIXTURES) at the tests/fixtures folder of a CS336 assignment-1 checkout"
)
LONG = (
    "AssertionError: RoPE rotation of interleaved pairs (float32 vs float64): max |error| 7.81; worst at [0, 0, 4]: "
    "got -3.95997, expected 3.8482226 (error 7.81); 8/8 elements outside tolerance (atol=0.0001, rtol=0.0001)\n"
    "likely cause: matches half-split rotation (rotate-half): pairs must be adjacent (2k, 2k+1)\n"
    "input: x(1, 1, 8), positions [3], theta=10000.0"
)


def _record(nodeid: str, spec: str, outcome: str, strength: str = "must", message: str = "") -> dict:
    from lmspec.conformance.report import summary

    return {
        "nodeid": f"conformance/cs336/test_x.py::{nodeid}",
        "spec": spec,
        "strength": strength,
        "outcome": outcome,
        "message": message,
        "summary": summary(message),
    }


def _report(records: list[dict]):
    import datetime

    from lmspec.conformance.target import Target
    from lmspec.tools.grade import points, results

    judge = {"tests": records, "sandbox": "bwrap", "compromised": [], "warnings": [], "faults": []}
    return results.build_report(
        judge,
        points=points.PointsTable(),
        target=Target("x.py", "/x/x.py", None, "x", "cs336"),
        started=datetime.datetime.now(datetime.UTC),
        duration_s=1.0,
        settings={},
    )


def _write_all(report, folder: Path) -> dict:
    from lmspec.tools.grade import points
    from lmspec.tools.grade.outputs import write_outputs

    return write_outputs(report, folder, ("json", "junit", "gradescope", "html"), points.PointsTable())


def test_a_skip_for_a_missing_oracle_file_is_not_checked() -> None:
    from types import SimpleNamespace

    from lmspec.conformance.outcomes import Outcome
    from lmspec.conformance.report import classify

    skipped = SimpleNamespace(skipped=True, passed=False, when="setup")
    assert classify(skipped, None, NOT_CHECKED) is Outcome.NOT_CHECKED  # type: ignore[arg-type]
    assert classify(skipped, None, "cuda requested but unavailable") is Outcome.SKIPPED  # type: ignore[arg-type]


def test_missing_fixtures_make_the_grade_incomplete_in_every_format(tmp_path: Path) -> None:
    """An item with tests that could not run is "incomplete", not "pass":
    worth 0, in the maximum, counted apart in the score line, and the
    verdict says so, the same in the table, results.json, HTML, JUnit and
    Gradescope."""
    from lmspec.tools.grade.report import render_table

    report = _report(
        [
            _record("test_rope", "2.rope", "passed"),
            _record("test_encode_ascii", "1.3.encode", "passed"),
            _record("test_encode_gpt2", "1.3.encode", "not_checked", message=NOT_CHECKED),
            _record("test_decode_gpt2", "1.3.decode", "not_checked", message=NOT_CHECKED),
        ]
    )
    statuses = {i.id: str(i.status) for i in report.items}
    assert statuses == {"1.3.encode": "incomplete", "1.3.decode": "incomplete", "2.rope": "pass"}, statuses
    assert (report.score, report.max_score, report.not_checked_points) == (2, 11, 9)
    assert not report.passed and report.verdict == "INCOMPLETE"
    line = "score 2/11 (18.2%) + 9 not checked (fixtures missing: run `lmspec fixtures fetch`, or pass --fixtures DIR)"
    assert report.score_line() == line
    table = render_table(report, width=120)
    assert line in table and "verdict: INCOMPLETE: 9 of 11 points could not be checked" in table, table
    assert "1.3.encode                 incomplete" in table
    assert "\x1b[36mincomplete" in render_table(report, color=True, width=120)
    data = _write_all(report, tmp_path)
    assert data["verdict"] == "INCOMPLETE" and data["incomplete"] and data["not_checked_points"] == 9
    assert data["score_line"] == line and data["test_counts"]["not_checked"] == 2
    html = (tmp_path / "report.html").read_text()
    assert 'id="verdict">INCOMPLETE' in html and 'id="not-checked">9 points' in html
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.get("verdict") == "INCOMPLETE"
    assert {s.get("type") for s in junit.iter("skipped")} == {"not_checked"}
    gradescope = json.loads((tmp_path / "gradescope_results.json").read_text())
    assert line in gradescope["output"] and "verdict: INCOMPLETE" in gradescope["output"]
    encode = next(t for t in gradescope["tests"] if t["number"] == "1.3.encode")
    assert encode["output"].startswith("status: incomplete") and encode["score"] == 0


def test_a_failure_beside_missing_fixtures_is_a_fail() -> None:
    report = _report(
        [
            _record("test_rope", "2.rope", "failed", message="AssertionError: wrong"),
            _record("test_decode_gpt2", "1.3.decode", "not_checked", message=NOT_CHECKED),
        ]
    )
    assert report.verdict == "FAIL" and "and incomplete: 3 points not checked" in report.verdict_line()


def test_counts_are_one_concept_each_everywhere(tmp_path: Path) -> None:
    """ "tests" are every test, scored and STRICT (the progress line's
    total); a STRICT finding is one STRICT test that did not pass: the
    column, the headline, results.json, HTML and Gradescope agree."""
    from lmspec.tools.grade.report import render_table

    records = [
        _record("test_linear", "2.linear", "passed"),
        _record("test_linear_1d", "2.linear", "failed", "strict", "AssertionError: 1-D"),
        _record("test_linear_4d", "2.linear", "failed", "strict", "AssertionError: 4-D"),
        _record("test_linear_cuda", "2.linear", "skipped", "strict", "cuda requested"),
        _record("test_silu", "2.silu", "passed"),
        _record("test_silu_inplace", "2.silu", "error", "strict", "RuntimeError: boom"),
        _record("test_rope", "2.rope", "failed", message="AssertionError: wrong"),
    ]
    report = _report(records)
    assert report.tests_line() == (
        "tests: 7 (3 scored, 4 STRICT): 2 passed, 4 failed (1 errors, 3 of them STRICT), 1 skipped"
    )
    assert report.strict_finding_count() == 3 and len(report.strict_findings()) == 2
    table = render_table(report, width=150)
    assert "2 findings" in table and "1 finding" in table
    assert "STRICT findings: 3 (in 2 items)" in table and "tests: 7 (3 scored, 4 STRICT)" in table
    data = _write_all(report, tmp_path)
    assert data["strict_findings"] == 3 and data["strict_items"] == 2 and data["test_counts"]["total"] == 7
    assert 'id="strict-findings">3<' in (tmp_path / "report.html").read_text()
    gradescope = json.loads((tmp_path / "gradescope_results.json").read_text())
    assert "STRICT findings (not scored): 3 (in 2 items)" in gradescope["output"]
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.get("tests") == "7" and len(list(junit.iter("testcase"))) == 7
    assert junit.get("failures") == "1", "STRICT findings are skipped cases, never failures"


def test_the_explanation_is_the_first_failing_test_in_the_suites_order() -> None:
    """The judge's report lists tests in the suite's order whatever order
    its processes finished them in, so an item's explanation is the same on
    every run."""
    from types import SimpleNamespace

    from lmspec.conformance.report import in_suite_order

    suite = [_record(f"test_{n}", "2.rope", "failed", message=f"AssertionError: {n}") for n in "abcd"]
    finished = [suite[2], suite[0], suite[3], suite[1]]  # as xdist might deliver them
    config = SimpleNamespace(
        _lmspec_results={r["nodeid"]: r for r in finished}, _lmspec_order=[r["nodeid"] for r in suite]
    )
    ordered = in_suite_order(config)  # type: ignore[arg-type]
    assert [r["nodeid"] for r in ordered] == [r["nodeid"] for r in suite]
    assert _report(ordered).items[0].explanation == "test_a: AssertionError: a"


def test_the_table_explains_each_failing_item_in_full_and_says_where_the_files_are(tmp_path: Path) -> None:
    from lmspec.tools.grade.report import render_table

    report = _report([_record("test_rope_matches_float64[cpu]", "2.rope", "failed", message=LONG)])
    files = (tmp_path / "results.json", tmp_path / "report.html")
    table = render_table(report, width=100, files=files)
    lines = table.splitlines()
    explained = [line for line in lines if str(tmp_path) not in line and not line.startswith("  score ")]
    assert all(len(line) <= 100 for line in explained), max(explained, key=len)
    row = next(line for line in lines if line.startswith("  2.rope "))
    assert row.endswith("(below)"), row
    below = " ".join(line.strip() for line in lines[lines.index(row) :])
    cause = below.index("likely cause: matches half-split rotation (rotate-half): pairs must be adjacent (2k, 2k+1)")
    assert cause < below.index("test_rope_matches_float64[cpu]: AssertionError: RoPE rotation"), below
    assert "8/8 elements outside tolerance (atol=0.0001, rtol=0.0001)" in below
    assert "input: x(1, 1, 8), positions [3], theta=10000.0" in below
    assert lines[-2:] == [
        f"  every message in full: {tmp_path / 'results.json'}",
        f"  the report for a browser: {tmp_path / 'report.html'}",
    ]


def _copy_checkout(dest: Path) -> Path:
    """lmspec's checkout as a fresh clone has it, with nothing beside it (no ../shared/fixtures)."""
    import shutil

    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for rel in listed:
        if (REPO / rel).is_file() and not rel.startswith("tests/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


@pytest.mark.slow
def test_a_fresh_clone_without_fixtures_grades_incomplete_not_full_marks(tmp_path: Path) -> None:
    """The quick start without the oracle files: 1.3.decode's GPT-2 test
    cannot run, so the item is incomplete and the grade is not a pass."""
    from grader_run import run_grader

    clone = _copy_checkout(tmp_path / "lmspec")
    env = {"LMSPEC_FIXTURES": None, "LMSPEC_REQUIRE_FIXTURES": None, "PYTHONPATH": str(clone)}
    rc, output, _ = run_grader(tmp_path / "out", "--spec", "1.3.decode", "--jobs", "1", env=env, checkout=clone)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    item = data["items"][0]
    assert rc == 1 and data["verdict"] == "INCOMPLETE" and item["status"] == "incomplete", output
    assert "not checked (fixtures missing: run `lmspec fixtures fetch`, or pass --fixtures DIR)" in data["score_line"]
    assert item["counts"].get("not_checked", 0) >= 1 and item["points"] == 0, item


# --- the test command, and what an interruption leaves behind -----------------------------------
def test_readme_test_command_is_what_ci_runs_and_sessions_cover_every_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    from lmspec.conformance.profiles import NAMES

    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == "python3 -m pip install -q nox && python3 -m nox -s lint full", ci
    assert f"\n{ci}\n" in (REPO / "README.md").read_text()
    # the noxfile read without nox itself (the environments nox builds do not hold it)
    stub = types.ModuleType("nox")
    stub.options, stub.Session, stub.session = types.SimpleNamespace(), object, lambda fn: fn
    monkeypatch.setitem(sys.modules, "nox", stub)
    noxfile = runpy.run_path(str(REPO / "noxfile.py"))
    assert tuple(noxfile["profiles"]()) == NAMES


def test_the_lists_that_split_the_fast_suite_name_tests_that_exist() -> None:
    """Every test that tests/conftest.py's CATALOG_SAMPLE and LONG_RUNS name is defined in the file
    named: a misspelt name would move a test between the fast suite and the full session unseen."""
    import conftest

    for listed in (conftest.CATALOG_SAMPLE, conftest.LONG_RUNS):
        for file, names in listed.items():
            tree = ast.parse((REPO / "tests" / file).read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
            assert names <= defined, (file, sorted(names - defined))


def test_the_long_runs_are_handed_out_first_and_each_file_stays_together() -> None:
    """tests/conftest.py orders the tests for pytest-xdist: a long run first, then the files with slow
    or catalog tests, then the rest; within those, each file's tests in their order."""
    import conftest

    def item(file: str, name: str, slow: bool = False):
        marker = lambda m: object() if slow and m == "slow" else None
        return types.SimpleNamespace(path=REPO / "tests" / file, originalname=name, get_closest_marker=marker)

    long_file, long_name = next((f, sorted(names)[0]) for f, names in conftest.LONG_RUNS.items())
    items = [
        item("test_a.py", "test_one"),
        item("test_b.py", "test_quick"),
        item("test_b.py", "test_slow", slow=True),
        item("test_mutants.py", "test_suite_kills_mutant"),
        item(long_file, long_name),
    ]
    order = [(i.path.name, i.originalname) for i in sorted(items, key=conftest._longest_first(items))]
    assert order == [
        (long_file, long_name),
        ("test_b.py", "test_quick"),
        ("test_b.py", "test_slow"),
        ("test_mutants.py", "test_suite_kills_mutant"),
        ("test_a.py", "test_one"),
    ]


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` now (by /proc's parent links)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])  # Ctrl-C takes the path a SIGTERM now takes
def test_an_interrupted_grading_leaves_no_process_running(tmp_path: Path, sig: str) -> None:
    """Ctrl-C, a SIGTERM (CI cancelling a job) or a SIGKILL of the grader
    ends its judge, the judge's processes and their workers within seconds."""
    import os
    import signal
    import time

    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lmspec", "grade", "--spec", "3.adamw,1.2.train_bpe", "--jobs", "2", "--out", str(out)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        progress = out / "logs" / "progress.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if progress.is_file() and '"nodeid"' in progress.read_text():
                break  # the judge's processes and their workers are running tests
            time.sleep(0.2)
        assert proc.poll() is None, "the grading ended before it could be interrupted"
        started = _children(proc.pid)
        assert len(started) >= 3, started  # the judge, its xdist workers, their workers
        os.kill(proc.pid, getattr(signal, sig))
        proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while _alive(started) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: (Path("/proc") / str(pid) / "cmdline").read_bytes()[:200] for pid in _alive(started)}
        assert not left, f"still running {15} s after {sig}: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_smoke_without_the_plot_extra_skips_the_plot_check_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import warnings

    from lmspec.tools.smoke import cs336, harness

    monkeypatch.setattr(cs336, "have_matplotlib", lambda: False)
    smoke = harness.Smoke(tmp_path)
    smoke.check("round trip", True, "fine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from inside a wrapper: the line below says it
        cs336._check_plot(smoke, [], tmp_path / "loss.png", 6.0, 7.0)
    assert harness._verdict(smoke) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == (
        "smoke ok: 1 checks passed, 1 skipped (loss plot: matplotlib is not installed: pip install 'lmspec[plot]')"
    )


def test_a_run_in_doubt_lists_every_selected_item_as_an_error_those_that_ran_and_those_that_did_not() -> None:
    """A judge without xdist stops at a module that fails to collect and reports no test: the items
    it never ran are errors too, not left out of the maximum score (nor is one that ran scored)."""
    import datetime

    from lmspec.conformance.target import Target
    from lmspec.tools.grade import points, results

    judge = {"tests": [_record("test_silu", "2.silu", "passed")], "sandbox": "bwrap", "faults": []}
    report = results.build_report(
        judge,
        points=points.PointsTable(),
        target=Target("x.py", "/x/x.py", None, "x", "cs336"),
        started=datetime.datetime.now(datetime.UTC),
        duration_s=1.0,
        settings={"spec": "2.silu,2.rope"},
        run_error="the suite itself is broken",
    )
    assert [(i.id, i.status) for i in report.items] == [("2.silu", "error"), ("2.rope", "error")]
    assert report.score == 0 and report.max_score == sum(i.max_points for i in report.items) > 0
    (silu, rope) = report.items
    assert len(silu.tests) == 1 and not rope.tests
    assert rope.explanation == "not graded: the suite itself is broken"


@pytest.mark.slow
def test_a_suite_module_that_fails_to_collect_is_the_graders_error(tmp_path: Path) -> None:
    """Under xdist a test module of the suite that fails to import is left out and the run goes
    on: the tests that remain must not be scored as if the suite were whole. Every item is an
    error naming the module, the score is 0, and the message says it is the grader's own error."""
    from grader_run import run_grader

    clone = _copy_checkout(tmp_path / "lmspec")
    with open(clone / "conformance" / "cs336" / "test_rope.py", "a") as f:
        f.write("\ndef broken(:\n")
    # two items: one judge process an item at most (launch.judge_processes)
    rc, output, _ = run_grader(tmp_path / "out", "--spec", "2.rope,2.silu", "--jobs", "2", checkout=clone)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rc == 1 and data["score"] == 0, output
    assert "test_rope.py" in data["error"] and "the grader's own error" in data["error"], data["error"]
    assert {i["status"] for i in data["items"]} == {"error"}, output
