"""The fork server (conformance/judge/forkserver.py): gradings forked from one
warm judge are separate judges, each starting from the server's state, and
one that runs past its deadline is ended like a fresh judge without taking
the server with it."""

import json
import os
from pathlib import Path

from lmspec.conformance.judge.forkserver import ForkServer
from lmspec.conformance.judge.launch import run_judge
from lmspec.conformance.options import Settings
from lmspec.conformance.target import resolve
from lmspec.tools.mutants import meta_server

#: A stand-in suite: it records the judge's process ids, leaves a mark in the judge's modules that
#: the next judge must not see, and waits while a flag file exists beside it.
SUITE = """
import json, os, time
from pathlib import Path

from lmspec.conformance import report

HERE = Path(__file__).parent


def test_starts_from_the_servers_state():
    (HERE / f"judge-{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid(), "parent": os.getppid()}))
    assert not hasattr(report, "_left_by_a_judge"), report._left_by_a_judge
    report._left_by_a_judge = os.getpid()
    while (HERE / "wait").exists():
        time.sleep(0.1)
"""


def _grade(tmp_path: Path, name: str, server: ForkServer, timeout: float = 300.0):
    settings = Settings(suite=[str(tmp_path / "suite" / "test_stand_in.py")], jobs=1, timeout=timeout)
    return run_judge(resolve(None, "cs336"), settings, tmp_path / name, server=server)


def _judges(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "suite").glob("judge-*.json"))]


def test_each_grading_is_a_judge_of_its_own_forked_from_one_server(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_stand_in.py").write_text(SUITE)
    server = ForkServer()
    try:
        runs = [_grade(tmp_path, f"run{i}", server) for i in range(2)]
    finally:
        server.close()
    for run in runs:
        assert run.report is not None, run.log.read_text()[-2000:]
        assert [t["outcome"] for t in run.report["tests"]] == ["passed"], run.log.read_text()[-2000:]
        assert run.returncode == 0 and not run.timed_out
    judges = _judges(tmp_path)
    assert len({j["pid"] for j in judges}) == 2, judges  # two processes...
    assert len({j["parent"] for j in judges}) == 1 and judges[0]["parent"] != os.getpid(), judges  # ...one server


def test_a_judge_past_its_deadline_is_ended_and_the_server_serves_on(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_stand_in.py").write_text(SUITE)
    (tmp_path / "suite" / "wait").touch()
    server = ForkServer()
    try:
        stuck = _grade(tmp_path, "stuck", server, timeout=10.0)
        (tmp_path / "suite" / "wait").unlink()
        after = _grade(tmp_path, "after", server)
    finally:
        server.close()
    assert stuck.timed_out and stuck.returncode != 0, stuck.log.read_text()[-2000:]
    assert after.report is not None and [t["outcome"] for t in after.report["tests"]] == ["passed"]
    parents = {j["parent"] for j in _judges(tmp_path)}  # the stuck judge's, if it got as far as its test
    assert len(parents) == 1 and os.getpid() not in parents, parents  # the same server served both


#: A stand-in suite that writes down the constants Hypothesis draws inputs from (read from the sources of
#: the local modules loaded by then), one file per judge, once the implementation has started.
CONSTANTS_SUITE = """
import os
from pathlib import Path

from hypothesis.internal.conjecture.providers import _get_local_constants


def test_writes_the_local_constants(impl):
    constants = sorted(repr(c) for c in _get_local_constants())
    (Path(__file__).parent / f"constants-{os.getpid()}.txt").write_text("\\n".join(constants))
"""


def test_forked_and_in_process_judges_draw_from_the_constants_a_fresh_one_reads(tmp_path: Path) -> None:
    """The server reads Hypothesis' constants of the modules it preloads once (forkserver.local_constants);
    a judge forked from it ends with the same set as a fresh judge, which reads them all itself. So does
    a judge running the implementation inside itself (--in-process, the meta-tests' catalog), forked from
    a server that preloads the references: their modules and the implementation's are the worker's, never
    read (channel.imports_unread)."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_stand_in.py").write_text(CONSTANTS_SUITE)
    settings = Settings(suite=[str(tmp_path / "suite" / "test_stand_in.py")], jobs=1, timeout=300.0)
    runs = [run_judge(resolve(None, "cs336"), settings, tmp_path / "fresh")]
    for server, way in ((ForkServer(), settings), (meta_server(), settings.replace(in_process=True))):
        try:
            runs.append(run_judge(resolve(None, "cs336"), way, tmp_path / f"forked-{len(runs)}", server=server))
        finally:
            server.close()
    for run in runs:
        assert run.report is not None and [t["outcome"] for t in run.report["tests"]] == ["passed"], (
            run.log.read_text()[-2000:]
        )
    assert runs[2].report["in_process"] and not runs[1].report["in_process"]
    written = [p.read_text().splitlines() for p in sorted((tmp_path / "suite").glob("constants-*.txt"))]
    assert len(written) == 3 and len(written[0]) > 100, [len(w) for w in written]
    assert written[0] == written[1] == written[2], [sorted(set(written[0]) ^ set(w))[:20] for w in written[1:]]
