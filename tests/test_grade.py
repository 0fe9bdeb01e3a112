"""Meta-tests of the grader (tools/grade).

End to end: ``python -m tools.grade`` on the hostile adapters of tests/hostile
(the reference with one function made to hang, crash, eat memory, exit, flood
output, tamper with the oracles, write into snapshots/, or break the
from-scratch rule), each limited with ``--spec`` to the item it attacks plus
one bystander item. A hostile behaviour must cost only the affected tests,
reported with the reason; the bystander keeps the result it has when the plain
reference is graded; tampering marks the run compromised. The gradings run
two at a time in the background (once per session, shared by xdist workers
through a lock), so the module takes about as long as its slowest pair.

Fast unit tests cover statuses, points, the report formats, the MANIFEST check
and batch mode (on the stand-in suite tests/grader_fixtures/suite_small.py).
"""

import csv
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools.grade import files, points, results
from tools.grade.runner import Limits, TestOutcome, classify

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "hostile"
FIXTURES = REPO / "tests" / "grader_fixtures"
SMALL_SUITE = FIXTURES / "suite_small.py"
BYSTANDER = "2.linear"
WRITES_SUITE_FILES = {"write_snapshots"}

# name -> (adapter, --spec, extra grader arguments)
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # longest first (they run two at a time); write_snapshots last, alone
    "hang_ignoring_signals": (
        str(HOSTILE / "hang_ignoring_signals.py"),
        "2.silu,2.linear",
        ("--jobs", "2", "--timeout-per-test", "5"),
    ),
    "reference": ("reference.adapter", "0.from_scratch,2.linear", ("--jobs", "2")),
    "uses_functional": (
        str(HOSTILE / "uses_functional.py"),
        "0.from_scratch,2.linear",
        ("--jobs", "2"),
    ),
    "hang": (
        str(HOSTILE / "hang.py"),
        "2.softmax,2.linear",
        ("--jobs", "2", "--timeout-per-test", "5"),
    ),
    "segfault": (str(HOSTILE / "segfault.py"), "2.silu,2.linear", ()),
    "exit_os": (str(HOSTILE / "exit_os.py"), "2.silu,2.linear", ()),
    "huge_alloc": (str(HOSTILE / "huge_alloc.py"), "2.silu,2.linear", ("--memory-limit", "3")),
    "exit_sys": (str(HOSTILE / "exit_sys.py"), "2.silu,2.linear", ()),
    "print_flood": (str(HOSTILE / "print_flood.py"), "2.silu,2.linear", ()),
    "patch_allclose": (str(HOSTILE / "patch_allclose.py"), "2.softmax,2.linear", ()),
    "patch_sdpa": (str(HOSTILE / "patch_sdpa.py"), "2.sdpa,2.linear", ()),
    "patch_asserts": (str(HOSTILE / "patch_asserts.py"), "2.softmax,2.linear", ()),
    "patch_during_test": (str(HOSTILE / "patch_during_test.py"), "2.silu,2.linear", ()),
    "import_error": (str(HOSTILE / "import_error.py"), "2.silu,2.linear", ()),
    "import_crash": (str(HOSTILE / "import_crash.py"), "2.silu,2.linear", ()),
    "write_snapshots": (str(HOSTILE / "write_snapshots.py"), "2.silu,2.linear", ()),
}


@dataclass
class Graded:
    returncode: int
    data: dict
    out: Path
    output: str
    seconds: float

    def item(self, item_id: str) -> dict:
        found = [i for i in self.data["items"] if i["id"] == item_id]
        assert found, f"{item_id} not in the report: {[i['id'] for i in self.data['items']]}\n{self.output}"
        return found[0]

    def outcomes(self, item_id: str) -> dict[str, str]:
        return {t["nodeid"]: t["outcome"] for t in self.item(item_id)["tests"]}


def run_grader(out: Path, *args: str, timeout: float = 400) -> tuple[int, str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    env.pop("LMSPEC_ADAPTER", None)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tools.grade", "--out", str(out), "--quiet", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout[-5000:] + proc.stderr[-5000:], time.monotonic() - start


def _grade_case(name: str, shared: Path) -> Graded:
    """Grade one case once per session, whichever xdist worker asks first."""
    out = shared / name
    out.mkdir(parents=True, exist_ok=True)
    done = out / "done.json"
    with open(out / ".lock", "w") as lock, open(shared / ".suite-files.lock", "w") as files_lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # a case that writes into the suite's files runs alone: the others would
        # (rightly) see the change and report their runs compromised
        fcntl.flock(files_lock, fcntl.LOCK_EX if name in WRITES_SUITE_FILES else fcntl.LOCK_SH)
        if not done.exists():
            adapter, spec, extra = CASES[name]
            args = [
                "--adapter",
                adapter,
                "--spec",
                spec,
                "--timeout",
                "240",
                "--memory-limit",
                "4",
                "--jobs",
                "1",
                *extra,
            ]
            try:
                rc, output, seconds = run_grader(out / "grade", *args)
            finally:
                if name == "write_snapshots":
                    (REPO / "snapshots" / "_hostile_write_snapshots.npz").unlink(missing_ok=True)
            done.write_text(json.dumps({"rc": rc, "output": output, "seconds": seconds}))
    meta = json.loads(done.read_text())
    results_file = out / "grade" / "results.json"
    data = json.loads(results_file.read_text()) if results_file.exists() else {}
    return Graded(meta["rc"], data, out / "grade", meta["output"], meta["seconds"])


class _Prefetch:
    """Runs every case two at a time in the background, in the order of CASES."""

    def __init__(self, shared: Path):
        self.shared = shared
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grade-case")
        self.futures: dict[str, Future] = {n: self.pool.submit(_grade_case, n, shared) for n in CASES}

    def get(self, name: str) -> Graded:
        return self.futures[name].result()


_PREFETCH: dict[str, _Prefetch] = {}
_LOCK = threading.Lock()


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the other worker may already hold a case
        shared = base.parent / "lmspec-grade-cases"  # this session's, shared by its workers
        return lambda name: _grade_case(name, shared)
    shared = base / "lmspec-grade-cases"
    with _LOCK:
        prefetch = _PREFETCH.setdefault(str(shared), _Prefetch(shared))
    return prefetch.get


@pytest.fixture(scope="session")
def suite_files_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lock file the cases share (exclusive for those writing the suite's files)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lmspec-grade-cases"
    shared.mkdir(parents=True, exist_ok=True)
    return shared / ".suite-files.lock"


def _trust_problems(g: Graded) -> list[str]:
    """compromised_reasons, less edits of conformance/ by people working in the
    same tree while the meta-tests run (the grader rightly reports those too)."""
    colleague = "the suite's files changed during grading (by the submission?): conformance/"
    return [r for r in g.data["compromised_reasons"] if not r.startswith(colleague)]


def _passed(g: Graded) -> bool:
    """Exit status 0, or 1 only because of the colleague edits above."""
    if g.returncode == 0:
        return True
    core = [i for i in g.data["items"] if i["group"] == "core"]
    return g.data["compromised"] and not _trust_problems(g) and all(i["status"] == "pass" for i in core)


def _assert_bystander(g: Graded, graded) -> None:
    """The item the hostile function does not touch keeps the reference's results."""
    assert g.outcomes(BYSTANDER) == graded("reference").outcomes(BYSTANDER), g.output


def _bad_messages(g: Graded, item_id: str) -> list[str]:
    return [t["message"] for t in g.item(item_id)["tests"] if t["outcome"] != "passed"]


# --- the reference and exit statuses ---------------------------------------------------------
@pytest.mark.slow
def test_reference_grades_clean(graded) -> None:
    """The reference passes the graded items, audits clean, is not compromised: exit 0."""
    g = graded("reference")
    assert _passed(g), g.output
    assert not _trust_problems(g), g.data["compromised_reasons"]
    assert g.data["audit_status"] == "clean" and g.data["audit"] == []
    assert all(i["status"] == "pass" for i in g.data["items"]), g.output
    for name in ("results.json", "junit.xml", "gradescope_results.json"):
        assert (g.out / name).is_file(), name


@pytest.mark.slow
def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    """The grader's own failures (unknown spec id, bad points file) exit with status 2."""
    rc, output, _ = run_grader(tmp_path / "a", "--spec", "9.nothing")
    assert rc == 2 and "9.nothing" in output
    bad = tmp_path / "points.json"
    bad.write_text('{"2.rope": -1}')
    rc, output, _ = run_grader(tmp_path / "b", "--points", str(bad))
    assert rc == 2 and "2.rope" in output


# --- hostile adapters ------------------------------------------------------------------------
@pytest.mark.slow
def test_hang_costs_only_its_tests(graded) -> None:
    """run_softmax loops forever: every softmax test times out, the bystander is untouched."""
    g = graded("hang")
    assert g.returncode == 1
    assert g.item("2.softmax")["status"] == "timeout"
    assert set(g.outcomes("2.softmax").values()) == {"timeout"}
    assert all("Timeout" in m for m in _bad_messages(g, "2.softmax"))
    _assert_bystander(g, graded)
    assert not _trust_problems(g)


@pytest.mark.slow
def test_hang_with_blocked_signals_is_killed(graded) -> None:
    """A hang that blocks the in-process timeouts is killed from outside: timeout, run goes on."""
    g = graded("hang_ignoring_signals")
    assert g.item("2.silu")["status"] == "timeout"
    assert all("killed" in m for m in _bad_messages(g, "2.silu")), _bad_messages(g, "2.silu")
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_segfault_is_a_crash_of_one_test(graded) -> None:
    """A segfault errors the test it happened in, with the signal named; the rest re-run."""
    g = graded("segfault")
    assert g.item("2.silu")["status"] == "error"
    assert all("crashed" in m and "Segmentation fault" in m for m in _bad_messages(g, "2.silu"))
    assert len(g.data["attempts"]) >= 2  # one process (--jobs 1): re-run after each crash
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_huge_allocation_fails_with_memory_limit(graded) -> None:
    """Asking for 100 GB fails that test under --memory-limit, named as such."""
    g = graded("huge_alloc")
    assert g.item("2.silu")["status"] == "fail"
    assert all("memory limit exceeded (--memory-limit 3 GB)" in m for m in _bad_messages(g, "2.silu"))
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_os_exit_is_a_crash_of_one_test(graded) -> None:
    """os._exit(0) inside a function is not a pass: the test errors with the exit status."""
    g = graded("exit_os")
    assert g.item("2.silu")["status"] == "error"
    messages = _bad_messages(g, "2.silu")
    assert all("crashed" in m and "os._exit(0)" in m for m in messages), messages
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_sys_exit_is_a_failure(graded) -> None:
    """sys.exit(3) inside a function is an ordinary failure (pytest catches SystemExit)."""
    g = graded("exit_sys")
    assert g.item("2.silu")["status"] == "fail"
    assert all("SystemExit" in m for m in _bad_messages(g, "2.silu"))
    assert len(g.data["attempts"]) == 1
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_output_flood_is_capped(graded) -> None:
    """50 MB of prints: results kept, a warning names the test, the logs stay small."""
    g = graded("print_flood")
    assert g.item("2.silu")["status"] == "pass"
    assert any("printed" in w and "MB" in w for w in g.data["warnings"]), g.data["warnings"]
    for log in (g.out / "logs").glob("*.log"):
        assert log.stat().st_size < Limits().output_cap_bytes + 200_000, log
    _assert_bystander(g, graded)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "item", "replaced"),
    [
        ("patch_allclose", "2.softmax", "torch.allclose replaced"),
        ("patch_sdpa", "2.sdpa", "torch.nn.functional.scaled_dot_product_attention replaced"),
        ("patch_asserts", "2.softmax", "conformance.asserts.assert_close replaced"),
    ],
)
def test_import_time_tampering_compromises_the_run(graded, case: str, item: str, replaced: str) -> None:
    """Replacing an oracle at import fails every test that runs and marks the run compromised."""
    g = graded(case)
    assert g.returncode == 1
    assert g.data["compromised"]
    assert any(replaced in r for r in g.data["compromised_reasons"]), g.data["compromised_reasons"]
    assert g.data["score"] == 0
    assert g.item(item)["status"] == "fail"
    assert all(m.startswith("tampering detected") for m in _bad_messages(g, BYSTANDER))
    gradescope = json.loads((g.out / "gradescope_results.json").read_text())
    assert gradescope["score"] == 0 and "COMPROMISED" in gradescope["output"]


@pytest.mark.slow
def test_tampering_during_a_test_fails_it_and_is_undone(graded) -> None:
    """Patching describe_mismatch inside run_silu fails that test; later tests run honestly."""
    g = graded("patch_during_test")
    assert g.data["compromised"]
    assert any("conformance.asserts.describe_mismatch replaced" in r for r in g.data["compromised_reasons"])
    assert g.item("2.silu")["status"] == "fail"
    _assert_bystander(g, graded)


@pytest.mark.slow
def test_writing_snapshots_compromises_the_run(graded) -> None:
    """A file written into snapshots/ during grading marks the run compromised."""
    g = graded("write_snapshots")
    assert g.data["compromised"]
    assert any("snapshots/_hostile_write_snapshots.npz added" in r for r in g.data["compromised_reasons"])
    assert not (REPO / "snapshots" / "_hostile_write_snapshots.npz").exists()


@pytest.mark.slow
def test_torch_functional_use_is_an_audit_finding(graded) -> None:
    """F.softmax in run_softmax: the audit names it and where; the score is unaffected (exit 0)."""
    g = graded("uses_functional")
    assert g.item("0.from_scratch")["status"] == "fail"
    assert g.data["audit_status"] == "findings"
    runtime = [
        f for f in g.data["audit"] if f["function"] == "torch.nn.functional.softmax" and f["kind"] == "runtime call"
    ]
    assert runtime and runtime[0]["where"].startswith("tests/hostile/uses_functional.py:"), g.data["audit"]
    assert runtime[0]["adapter_function"] == "run_softmax"
    assert any(f["kind"] == "reference" and "uses_functional.py" in f["where"] for f in g.data["audit"])
    assert g.item("2.linear")["status"] == "pass"
    assert _passed(g)  # the audit is not in the score: the verdict is still a pass


@pytest.mark.slow
def test_import_error_scores_zero_with_the_reason(graded) -> None:
    """A submission that does not import: score 0, the reason given, exit 1 (not 2)."""
    g = graded("import_error")
    assert g.returncode == 1, g.output
    assert "cs336_basics_that_does_not_exist" in (g.data["error"] or "")
    assert g.data["score"] == 0
    assert {i["status"] for i in g.data["items"]} == {"error"}


@pytest.mark.slow
def test_import_that_kills_the_process_scores_zero(graded) -> None:
    """os._exit at import: every test is listed as an error naming the cause, exit 1."""
    g = graded("import_crash")
    assert g.returncode == 1, g.output
    assert "could not be loaded" in (g.data["error"] or "")
    assert {i["status"] for i in g.data["items"]} == {"error"}
    assert sum(len(i["tests"]) for i in g.data["items"]) > 0


# --- unit tests (no subprocess) ----------------------------------------------------------------
def _t(outcome: str, message: str = "", spec: str = "2.rope") -> TestOutcome:
    return TestOutcome(f"conformance/test_x.py::test_{outcome}", spec, outcome, message)


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        (["passed", "passed"], "pass"),
        (["passed", "failed"], "fail"),
        (["failed", "timeout"], "timeout"),
        (["timeout", "error"], "error"),
        (["not_implemented", "not_implemented"], "not implemented"),
        (["passed", "not_implemented"], "fail"),
        (["skipped", "skipped"], "skipped"),
        (["passed", "skipped"], "pass"),
    ],
)
def test_item_status_rules(outcomes: list[str], status: str) -> None:
    """An item's status follows the documented precedence (tools/grade/results.py)."""
    tests = [_t(o, f"{o} because") for o in outcomes]
    assert results.item_status(tests, extended=False, audit=False)[0] == status


def test_extended_not_provided_and_audit_partial() -> None:
    """Extended items are "not provided"; a partly-run audit with no finding passes."""
    assert results.item_status([_t("not_provided", "not provided: run_generate")], extended=True, audit=False)[0] == (
        "not provided"
    )
    assert results.item_status([_t("passed"), _t("not_implemented")], extended=False, audit=True)[0] == "pass"


def test_classify_timeouts_and_memory() -> None:
    """Phase reports become outcomes; timeouts and memory errors are named."""
    limits = Limits(memory_gb=2)
    call = {
        "when": "call",
        "outcome": "failed",
        "message": "Failed: Timeout (>3.0s) from pytest-timeout.",
    }
    assert classify("n", "2.rope", [{"when": "setup", "outcome": "passed"}, call], limits).outcome == "timeout"
    mem = {
        "when": "call",
        "outcome": "failed",
        "message": "RuntimeError: DefaultCPUAllocator: can't allocate memory",
    }
    got = classify("n", "2.rope", [mem], limits)
    assert got.outcome == "failed" and got.message.startswith("memory limit exceeded (--memory-limit 2 GB)")
    skip = {"when": "setup", "outcome": "skipped", "message": "not implemented: run_rope"}
    assert classify("n", "2.rope", [skip], limits).outcome == "not_implemented"


def test_points_table_matches_the_handout_and_loads_overrides(tmp_path: Path) -> None:
    """Core points sum to the handout's 62 code points; --points files override and validate."""
    table = points.PointsTable()
    from conformance.spec_items import ITEMS

    core = sum(table[i.id] for i in ITEMS if not i.extended)
    assert core == 62
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


@pytest.mark.slow
def test_small_suite_formats_and_batch(tmp_path: Path, suite_files_lock: Path) -> None:
    """Batch mode on the stand-in suite: a row per submission, formats written, no adapter = 0."""
    with open(suite_files_lock, "w") as lock:  # not while a case writes into snapshots/
        fcntl.flock(lock, fcntl.LOCK_SH)
        _batch(tmp_path)


def _batch(tmp_path: Path) -> None:
    batch = tmp_path / "subs"
    (batch / "alice" / "tests").mkdir(parents=True)
    (batch / "alice" / "tests" / "adapters.py").write_text((FIXTURES / "adapter_good.py").read_text())
    (batch / "bob").mkdir()
    (batch / "bob" / "adapters.py").write_text("def run_softmax(x, dim):\n    return x\n")
    (batch / "carol").mkdir()
    out = tmp_path / "out"
    rc, output, _ = run_grader(out, "--batch", str(batch), "--suite", str(SMALL_SUITE), "--jobs", "2")
    assert rc == 1, output
    with open(out / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"alice", "bob", "carol"}
    assert rows["alice"]["passed"] == "True" and float(rows["alice"]["score"]) == float(rows["alice"]["max_score"])
    assert rows["bob"]["passed"] == "False" and rows["bob"]["items_not_implemented"] == "3"
    assert "no tests/adapters.py or adapters.py" in rows["carol"]["error"]
    alice = json.loads((out / "alice" / "results.json").read_text())
    assert {i["id"]: i["status"] for i in alice["items"]}["4.generation"] == "not provided"
    junit = ET.parse(out / "alice" / "junit.xml").getroot()
    assert junit.tag == "testsuites" and int(junit.get("tests")) == 11
    gs = json.loads((out / "bob" / "gradescope_results.json").read_text())
    assert {t["number"] for t in gs["tests"]} >= {"2.softmax", "2.linear"} and gs["score"] == 0
