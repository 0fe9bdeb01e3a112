"""Meta-tests of the trust model: hostile submissions (tests/hostile) graded
end to end by ``python -m tools.grade``.

Each case copies its adapter into a fresh folder (the submission), plants a
secret in the grader's environment, grades the items the adapter attacks
plus one bystander item, and then checks beside its own verdict what every
case must satisfy: no process of the submission is left, the planted secret
appears in no output file, results.json is the grader's own (and stays so),
and, for the network case, no connection reached the listener the test
opened. Gradings run two at a time in the background, once per session
(shared by xdist workers through a lock).

The sandbox cases need bubblewrap; without it they skip, except in CI
(LMSPEC_REQUIRE_BWRAP=1, set by .ci/run), where that is a failure.
"""

import ast
import fcntl
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from grader_run import run_grader

from lmspec.conformance.judge.sandbox import bwrap_problem

REPO = Path(__file__).resolve().parent.parent
HOSTILE = REPO / "tests" / "hostile"
BYSTANDER = "2.linear"
SECRET = "lmspec-planted-secret-0d5a"
NEEDS_BWRAP = pytest.mark.skipif(
    bwrap_problem() is not None and not os.environ.get("LMSPEC_REQUIRE_BWRAP"),
    reason=f"the sandbox cases need bubblewrap: {bwrap_problem()}",
)

# name -> extra grader arguments (the adapter's HOSTILE header gives its --spec)
CASES: dict[str, tuple[str, ...]] = {
    # longest first: they run two at a time
    "hang": ("--timeout-per-call", "5"),
    "print_flood": (),
    "detached_survivor": (),
    "reference": (),
    "network": (),
    "segfault": (),
    "exit_os": (),
    "exit_sys": (),
    "huge_alloc": ("--memory-limit", "3"),
    "frame_flood": (),
    "shm_fill": (),
    "kill_ancestors": (),
    "env_secrets": (),
    "noop_tests": (),
    "forge_events": (),
    "delegate_reference": (),
    "oracle_lookup": (),
    "silu_zeroes_input": (),
    "mutate_inputs": (),
    "patch_allclose": (),
    "patch_sdpa": (),
    "patch_asserts": (),
    "patch_during_test": (),
    "uses_functional": (),
    "import_error": (),
    "import_crash": (),
    "write_snapshots": (),
}


@dataclass
class Graded:
    name: str
    returncode: int
    data: dict
    out: Path
    output: str
    seconds: float
    leftovers: list[str] = field(default_factory=list)
    secret_in: list[str] = field(default_factory=list)
    results_changed_later: bool = False
    connections: int = 0

    def item(self, item_id: str) -> dict:
        found = [i for i in self.data["items"] if i["id"] == item_id]
        assert found, f"{item_id} not in the report: {[i['id'] for i in self.data['items']]}\n{self.output}"
        return found[0]

    def outcomes(self, item_id: str) -> dict[str, str]:
        return {t["nodeid"]: t["outcome"] for t in self.item(item_id)["tests"]}

    def bad_messages(self, item_id: str, strict: bool = False) -> list[str]:
        item = self.item(item_id)
        tests = item["tests"] + (item["strict"]["tests"] if strict and item["strict"] else [])
        return [t["message"] for t in tests if t["outcome"] != "passed"]


def _header(path: Path) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "HOSTILE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path}: no HOSTILE header")


class _Listener:
    """A TCP listener on the loopback that counts the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        self.stop = True
        self.thread.join(timeout=5)
        self.sock.close()
        return self.connections


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry}: {cmdline[:200]}")
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def _prepare(name: str, folder: Path, port: int) -> tuple[str, list[str]]:
    """The submission folder for a case; (adapter, grader arguments)."""
    if name == "reference":
        return "lmspec.reference.adapter", ["--spec", f"0.from_scratch,{BYSTANDER}"]
    source = HOSTILE / f"{name}.py"
    header = _header(source)
    sub = folder / "submission"
    sub.mkdir(parents=True, exist_ok=True)
    text = source.read_text().replace("@@REPO@@", str(REPO)).replace("@@PORT@@", str(port))
    text = text.replace("@@MARKER@@", f"marker-{name}")
    adapter = sub / source.name
    adapter.write_text(text)
    args = ["--spec", ",".join(header["spec"])]
    if header.get("allow_reference", True):
        args.append("--allow-reference")
    return str(adapter), args


def _grade_case(name: str, shared: Path) -> Graded:
    folder = shared / name
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "done.json"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            listener = _Listener()
            adapter, args = _prepare(name, folder, listener.port)
            try:
                rc, output, seconds = run_grader(
                    folder / "grade",
                    "--adapter",
                    adapter,
                    *args,
                    "--jobs",
                    "1",
                    "--timeout",
                    "400",
                    *CASES[name],
                    env={"GITHUB_TOKEN": SECRET, "LMSPEC_TEST_TOKEN": SECRET},
                )
            finally:
                time.sleep(1.0)
                connections = listener.close()
                (REPO / "snapshots" / "_hostile_write_snapshots.npz").unlink(missing_ok=True)
            results = folder / "grade" / "results.json"
            before = _digest(results)
            if name == "detached_survivor":
                time.sleep(4.0)  # a survivor would rewrite results.json every second
            leftovers = _processes_mentioning(str(folder / "submission")) if name != "reference" else []
            secret_in = [
                str(p.relative_to(folder))
                for p in (folder / "grade").rglob("*")
                if p.is_file() and SECRET in p.read_text(errors="replace")
            ]
            meta = {
                "rc": rc,
                "output": output,
                "seconds": seconds,
                "leftovers": leftovers,
                "secret_in": secret_in,
                "results_changed_later": _digest(results) != before,
                "connections": connections,
            }
            done.write_text(json.dumps(meta))
    meta = json.loads(done.read_text())
    results_file = folder / "grade" / "results.json"
    data = json.loads(results_file.read_text()) if results_file.exists() else {}
    return Graded(
        name,
        meta["rc"],
        data,
        folder / "grade",
        meta["output"],
        meta["seconds"],
        meta["leftovers"],
        meta["secret_in"],
        meta["results_changed_later"],
        meta["connections"],
    )


class _Prefetch:
    def __init__(self, shared: Path):
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hostile")
        self.futures: dict[str, Future] = {n: self.pool.submit(_grade_case, n, shared) for n in CASES}

    def get(self, name: str) -> Graded:
        return self.futures[name].result()


_PREFETCH: dict[str, _Prefetch] = {}
_LOCK = threading.Lock()


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the other worker may already hold a case
        shared = base.parent / "lmspec-hostile-cases"
        return lambda name: _grade_case(name, shared)
    shared = base / "lmspec-hostile-cases"
    with _LOCK:
        prefetch = _PREFETCH.setdefault(str(shared), _Prefetch(shared))
    return prefetch.get


def _check_common(g: Graded, graded, *, bystander: bool = True) -> None:
    """What every hostile grading must satisfy besides its own verdict."""
    assert not g.leftovers, f"processes of the submission outlived the grading: {g.leftovers}"
    assert not g.secret_in, f"the planted secret reached {g.secret_in}"
    assert not g.results_changed_later, "results.json changed after the grader exited"
    assert g.connections == 0, f"{g.connections} connection(s) reached the loopback listener"
    assert g.data.get("sandbox") == "bwrap", g.output
    if bystander:
        assert g.outcomes(BYSTANDER) == graded("reference").outcomes(BYSTANDER), g.output


# --- the reference ------------------------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_reference_grades_clean(graded) -> None:
    """The reference passes, audits clean, is not compromised: exit 0, every format written."""
    g = graded("reference")
    assert g.returncode == 0, g.output
    assert not g.data["compromised"], g.data["compromised_reasons"]
    assert g.data["audit_status"] == "clean" and g.data["audit"] == []
    assert all(i["status"] == "pass" for i in g.data["items"]), g.output
    for name in ("results.json", "junit.xml", "gradescope_results.json"):
        assert (g.out / name).is_file(), name


# --- attacks on the judge -------------------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_noop_test_functions_change_nothing(graded) -> None:
    """Neutering the suite's test functions at import reaches nothing (the suite
    is not in the submission's process); the attempt to import it compromises the run."""
    g = graded("noop_tests")
    _check_common(g, graded)
    assert g.item("2.softmax")["status"] == "fail"
    assert g.data["compromised"] and g.data["score"] == 0 and g.returncode == 1
    assert any("'conformance'" in r for r in g.data["compromised_reasons"]), g.data["compromised_reasons"]


@pytest.mark.slow
@NEEDS_BWRAP
def test_forged_events_break_only_the_forger(graded) -> None:
    """Forged records written to every descriptor land in the worker's own
    channel: it cannot be loaded (score 0, exit 1), no report file is touched."""
    g = graded("forge_events")
    _check_common(g, graded, bystander=False)
    assert g.returncode == 1 and g.data["score"] == 0
    assert "could not be loaded" in (g.data["error"] or "") or "protocol" in (g.data["error"] or ""), g.data["error"]
    assert {i["status"] for i in g.data["items"]} == {"error"}


@pytest.mark.slow
@NEEDS_BWRAP
def test_delegating_to_the_reference_is_compromised(graded) -> None:
    """`from lmspec.reference.adapter import *` without lmspec in reach: it
    does not import, and reaching for lmspec's package marks the run compromised."""
    g = graded("delegate_reference")
    _check_common(g, graded, bystander=False)
    assert g.returncode == 1 and g.data["score"] == 0
    assert g.data["compromised"]
    assert any("'lmspec'" in r for r in g.data["compromised_reasons"]), g.data["compromised_reasons"]
    assert "No module named 'lmspec'" in (g.data["error"] or "")


@pytest.mark.slow
@NEEDS_BWRAP
def test_oracle_lookup_finds_nothing(graded) -> None:
    """The suite's oracles are not in the submission's sys.modules: its fallback
    answer fails 2.softmax; nothing else changes (not compromised: it imported nothing)."""
    g = graded("oracle_lookup")
    _check_common(g, graded)
    assert g.item("2.softmax")["status"] == "fail"
    assert not g.data["compromised"] and g.returncode == 1


@pytest.mark.slow
@NEEDS_BWRAP
def test_killing_ancestors_reaches_nobody(graded) -> None:
    """SIGKILL to the parent, to every visible pid and to -1 reaches only the
    worker's own PID namespace: the grading completes and run_silu's answer passes."""
    g = graded("kill_ancestors")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "pass", g.output
    assert g.returncode == 0 and g.data["score"] == g.data["max_score"]


@pytest.mark.slow
@NEEDS_BWRAP
def test_detached_survivor_dies_with_the_sandbox(graded) -> None:
    """A double-forked, setsid survivor dies with the worker's PID namespace:
    no process is left and results.json is not rewritten afterwards."""
    g = graded("detached_survivor")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "fail"
    assert "marker-detached_survivor" not in (g.out / "results.json").read_text()
    assert g.data["score"] < g.data["max_score"]


@pytest.mark.slow
@NEEDS_BWRAP
def test_environment_secrets_stay_out(graded) -> None:
    """The worker's environment is an allow-list: the planted token is in no
    output file (the worker printed and raised its whole environment)."""
    g = graded("env_secrets")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "fail"
    assert any("environment: " in m for m in g.bad_messages("2.silu")), g.bad_messages("2.silu")


@pytest.mark.slow
@NEEDS_BWRAP
def test_network_is_unreachable(graded) -> None:
    """No network namespace but its own: no connection reaches the loopback
    listener; the correct answers still pass."""
    g = graded("network")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "pass"
    assert g.returncode == 0


@pytest.mark.slow
@NEEDS_BWRAP
def test_inplace_silu_that_zeroes_its_input_fails(graded) -> None:
    """Zeroing the input and returning it cannot fool the oracle (it has its own copy)."""
    g = graded("silu_zeroes_input")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "fail"
    assert g.returncode == 1


@pytest.mark.slow
@NEEDS_BWRAP
def test_mutating_inputs_is_a_strict_finding_only(graded) -> None:
    """Correct answers that then mutate their inputs pass every scored test;
    the mutation is reported as a STRICT finding of 2.silu and 2.linear."""
    g = graded("mutate_inputs")
    _check_common(g, graded, bystander=False)
    assert g.returncode == 0 and g.data["score"] == g.data["max_score"]
    for item in ("2.silu", "2.linear"):
        assert g.item(item)["status"] == "pass"
        strict = g.item(item)["strict"]
        assert strict["status"] == "fail", strict
        assert any("changed its arguments in place" in t["message"] for t in strict["tests"])
    assert g.data["strict_findings"] >= 2


# --- faults of the submission's process --------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_hang_costs_one_timeout(graded) -> None:
    """run_softmax loops forever in a function ten tests call: the first call
    times out (the worker is killed), the others are not called again."""
    g = graded("hang")
    _check_common(g, graded)
    assert g.item("2.softmax")["status"] == "timeout"
    messages = g.bad_messages("2.softmax", strict=True)
    assert len(messages) >= 10 and all("Timeout" in m for m in messages), messages
    assert sum("did not return within 5 s" in m for m in messages) == 1, messages
    assert sum(m.startswith("Timeout: not called:") for m in messages) == len(messages) - 1
    assert g.seconds < graded("reference").seconds + 45, f"{g.seconds:.0f} s"


@pytest.mark.slow
@NEEDS_BWRAP
def test_segfault_is_a_crash_of_its_calls(graded) -> None:
    g = graded("segfault")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "error"
    messages = g.bad_messages("2.silu")
    assert all("crash" in m for m in messages) and any("Segmentation fault" in m for m in messages), messages


@pytest.mark.slow
@NEEDS_BWRAP
def test_os_exit_is_a_crash_not_a_pass(graded) -> None:
    g = graded("exit_os")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "error"
    assert any("exited with status 0" in m for m in g.bad_messages("2.silu")), g.bad_messages("2.silu")


@pytest.mark.slow
@NEEDS_BWRAP
def test_sys_exit_is_an_ordinary_failure(graded) -> None:
    g = graded("exit_sys")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "fail"
    assert all("SystemExit" in m for m in g.bad_messages("2.silu"))


@pytest.mark.slow
@NEEDS_BWRAP
def test_huge_allocation_fails_with_memory_limit(graded) -> None:
    g = graded("huge_alloc")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "fail"
    assert all("memory limit exceeded (--memory-limit 3 GB)" in m for m in g.bad_messages("2.silu"))


@pytest.mark.slow
@NEEDS_BWRAP
def test_shared_memory_and_dev_are_bounded(graded) -> None:
    """/dev/shm is a tmpfs of its own (256 MiB) and /dev is read-only: storing
    1 GB there fails (run_silu answers right only then)."""
    g = graded("shm_fill")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "pass", g.output
    assert g.returncode == 0


@pytest.mark.slow
@NEEDS_BWRAP
def test_a_frame_of_many_empty_arrays_is_refused_before_it_is_built(graded) -> None:
    """A reply of 50,000 empty arrays (a frame may hold 20,000) is a protocol violation of
    run_silu's calls (counted as it is read: no more than the limit is built); the bystander
    still passes."""
    g = graded("frame_flood")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "error"
    messages = g.bad_messages("2.silu")
    assert messages and all("protocol violation" in m and "exceeds the limit" in m for m in messages), messages


@pytest.mark.slow
@NEEDS_BWRAP
def test_output_flood_is_counted_not_kept(graded) -> None:
    g = graded("print_flood")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "pass"
    assert any("printed" in w and "MB" in w for w in g.data["warnings"]), g.data["warnings"]
    assert sum(p.stat().st_size for p in g.out.rglob("*") if p.is_file()) < 5_000_000


# --- tampering with libraries, now in the submission's own process only ------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
@pytest.mark.parametrize("case", ["patch_allclose", "patch_sdpa"])
def test_patching_libraries_fools_only_the_submission(graded, case: str) -> None:
    """torch patched in the worker is not the judge's torch: the wrong answer
    fails, the run is not compromised (no lmspec package was reached for)."""
    g = graded(case)
    _check_common(g, graded)
    item = "2.sdpa" if case == "patch_sdpa" else "2.softmax"
    assert g.item(item)["status"] == "fail" and not g.data["compromised"]


@pytest.mark.slow
@NEEDS_BWRAP
@pytest.mark.parametrize("case", ["patch_asserts", "patch_during_test"])
def test_reaching_for_the_suite_is_compromised(graded, case: str) -> None:
    """Importing conformance.asserts (at import, or inside a call) fails there
    and marks the run compromised: score 0."""
    g = graded(case)
    _check_common(g, graded, bystander=case != "patch_asserts")
    assert g.data["compromised"] and g.data["score"] == 0 and g.returncode == 1
    assert any("'conformance" in r for r in g.data["compromised_reasons"]), g.data["compromised_reasons"]


@pytest.mark.slow
@NEEDS_BWRAP
def test_writing_into_the_suite_is_impossible(graded) -> None:
    g = graded("write_snapshots")
    _check_common(g, graded)
    assert g.item("2.silu")["status"] == "pass"
    assert not g.data["compromised"], g.data["compromised_reasons"]
    assert not (REPO / "snapshots" / "_hostile_write_snapshots.npz").exists()


@pytest.mark.slow
@NEEDS_BWRAP
def test_torch_functional_use_is_an_audit_finding(graded) -> None:
    """F.softmax in run_softmax: the audit names it and where; not in the score."""
    g = graded("uses_functional")
    _check_common(g, graded)
    assert g.item("0.from_scratch")["status"] == "fail"
    assert g.data["audit_status"] == "findings"
    runtime = [
        f for f in g.data["audit"] if f["function"] == "torch.nn.functional.softmax" and f["kind"] == "runtime call"
    ]
    assert runtime and runtime[0]["where"].startswith("uses_functional.py:"), g.data["audit"]
    assert runtime[0]["adapter_function"] == "run_softmax" and runtime[0]["source"].startswith("worker")
    assert any(f["kind"] == "reference" and "uses_functional.py" in f["where"] for f in g.data["audit"])
    assert g.returncode == 0  # the audit is not in the score


# --- submissions that do not load ---------------------------------------------------------------------
@pytest.mark.slow
@NEEDS_BWRAP
def test_a_package_that_is_not_installed_is_a_placeholder_not_an_error(graded) -> None:
    """`import cs336_basics_that_does_not_exist` at import_error.py:8 binds a
    placeholder (listed with where it was imported); nothing uses it, so
    every item is graded (issue 27: a missing package never ends a grading)."""
    g = graded("import_error")
    _check_common(g, graded, bystander=False)
    assert g.returncode == 0 and g.data["error"] is None, g.output
    intake = g.data["implementation"]["intake"]
    assert intake["placeholders"] == {"cs336_basics_that_does_not_exist": "import_error.py:8"}, intake
    assert {i["status"] for i in g.data["items"] if i["group"] == "core"} == {"pass"}, g.output
    assert not g.data["compromised"]


@pytest.mark.slow
@NEEDS_BWRAP
def test_import_that_kills_the_process_scores_zero(graded) -> None:
    g = graded("import_crash")
    _check_common(g, graded, bystander=False)
    assert g.returncode == 1 and g.data["score"] == 0
    assert "could not be loaded" in (g.data["error"] or "") and "status 1" in g.data["error"]
    assert {i["status"] for i in g.data["items"]} == {"error"}


# --- the staff's terminal -------------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.slow
@NEEDS_BWRAP
def test_terminal_control_sequences_never_reach_an_output(tmp_path: Path) -> None:
    """A submission's messages carry clear-screen, cursor, OSC-title, C1 and bell
    sequences: the table printed to the console (the table is on: no --quiet),
    results.json, the JUnit XML and the Gradescope file carry the message
    without one control character but newline and tab."""
    adapter, args = _prepare("terminal_escapes", tmp_path, 0)
    out = tmp_path / "grade"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.grade", "--out", str(out), "--adapter", adapter, "--jobs", "1", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        timeout=600,
    )
    console = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert proc.returncode == 1, console
    assert "lmspec-escape-marker" in console, console  # the message is shown ...
    assert not _CONTROL.findall(console), sorted(set(_CONTROL.findall(console)))  # ... without its controls
    data = json.loads((out / "results.json").read_text())
    silu = next(i for i in data["items"] if i["id"] == "2.silu")
    assert silu["status"] == "fail" and "lmspec-escape-marker" in json.dumps(silu)
    for name in ("results.json", "gradescope_results.json"):
        found = [s for s in _strings(json.loads((out / name).read_text())) if _CONTROL.search(s)]
        assert not found, (name, found[:3])
    junit = (out / "junit.xml").read_text()
    assert "lmspec-escape-marker" in junit and not _CONTROL.search(junit.replace("\n", "").replace("\t", ""))
