"""Grading on Dask distributed (``lmspec grade --batch``): each submission is
one task. Nothing assumes a shared filesystem: a submission travels to its
worker as a deterministic tar.gz (bytes), is unpacked in a temporary folder
there and graded there by the same ``grade()`` (judge and sandbox) as a
single run; its files come back as bytes, and the client writes them.

What every task shares (the judge's settings, the points table, a custom
suite's files and the oracle fixtures, both as archives, and the digest of
the lmspec code that decides results) is one :class:`Payload`, scattered once
to every worker. A worker whose lmspec differs from the client's refuses the
task, naming both digests, rather than grade with other rules.

Dask's own machinery makes the batch robust: a task whose worker dies is
rescheduled on another worker (the scheduler's ``allowed-failures``, 3 by
default, before it gives up on it with KilledWorker), and a task that
raises is retried once (``retries=1``).
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmspec.tools.grade.archive import Packed, pack, unpack
from lmspec.tools.grade.files import REPO, tree_digest
from lmspec.tools.grade.points import PointsTable

LOG_CAP = 1_000_000
#: The lmspec code whose change changes results (the digest is part of every content hash).
RESULT_CODE = (
    REPO / "conformance",
    REPO / "snapshots",
    REPO / "reference",
    *(REPO / "tools" / "grade" / f"{m}.py" for m in ("grading", "results", "points", "envs", "repository")),
)


def code_digest() -> str:
    """sha256 over the lmspec code that decides results (RESULT_CODE)."""
    return hashlib.sha256(json.dumps(sorted(tree_digest(RESULT_CODE).items())).encode()).hexdigest()


#: Settings that do not change results (how work is spread, where files go).
_NOT_RESULTS = (
    "jobs",
    "suite",
    "fixtures",
    "out",
    "format",
    "batch",
    "workers",
    "scheduler",
    "regrade",
    "quiet",
    "timings",
    "env_cache",
    "points",
)


@dataclass(frozen=True)
class Payload:
    """What every task of a batch shares (scattered once to every worker)."""

    settings: Any  # conformance/options.py; suite and fixtures: set on the worker from the archives below
    points: PointsTable
    formats: tuple[str, ...]
    suite: Packed | None  # a custom --suite (None: the worker's own lmspec suite)
    suite_names: tuple[str, ...]
    fixtures: Packed | None
    lmspec_digest: str
    digest: str = ""  # of the settings that change results (settings_digest)

    def result_settings(self) -> dict[str, Any]:
        """The grading settings that change results (``jobs`` does not: it
        only spreads the same tests over more processes)."""
        options = dataclasses.asdict(self.settings)
        for key in _NOT_RESULTS:
            options.pop(key)
        return {
            "options": options,
            "suite": self.suite.sha256 if self.suite else "lmspec",
            "fixtures": self.fixtures.sha256 if self.fixtures else None,
            "points": {
                "points": self.points.points,
                "partial_credit": self.points.partial_credit,
                "visibility": self.points.visibility,
                "leaderboard": list(self.points.leaderboard),
            },
            "formats": sorted(self.formats),
            "lmspec": self.lmspec_digest,
        }


def make_payload(settings: Any, *, points: PointsTable, formats: tuple[str, ...], fixtures: Path | None) -> Payload:
    suite = suite_names = None
    if settings.suite:
        suite, suite_names = _pack_suite(settings.suite)
    payload = Payload(
        settings=settings,
        points=points,
        formats=formats,
        suite=suite,
        suite_names=suite_names or (),
        fixtures=pack(fixtures) if fixtures is not None else None,
        lmspec_digest=code_digest(),
    )
    digest = hashlib.sha256(json.dumps(payload.result_settings(), sort_keys=True, default=str).encode()).hexdigest()
    return dataclasses.replace(payload, digest=digest)


def _pack_suite(paths: tuple[str, ...]) -> tuple[Packed, tuple[str, ...]]:
    with tempfile.TemporaryDirectory(prefix="lmspec-suite-") as tmp:
        names = []
        for n, path in enumerate(paths):
            name = f"{n}_{Path(path).name}"
            source, dest = Path(path), Path(tmp) / name
            if source.is_dir():
                shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, dest)
            names.append(name)
        return pack(Path(tmp)), tuple(names)


def content_hash(packed: Packed, payload: Payload) -> str:
    """The submission's identity for resuming: its archive plus the settings."""
    return hashlib.sha256(f"{packed.sha256}:{payload.digest}".encode()).hexdigest()


# --- on the worker -------------------------------------------------------------------------------
_UNPACKED: dict[str, Path] = {}
_OWN_DIGEST: list[str] = []


def _cached(packed: Packed) -> Path:
    """A shared archive, unpacked once per worker machine."""
    if packed.sha256 in _UNPACKED:
        return _UNPACKED[packed.sha256]
    final = Path(tempfile.gettempdir()) / "lmspec-batch-cache" / packed.sha256[:32]
    if not final.is_dir():
        staging = Path(tempfile.mkdtemp(prefix="unpack-", dir=final.parent if final.parent.is_dir() else None))
        unpack(packed.archive, staging)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staging, final)
        except OSError:  # another worker on this machine was first
            shutil.rmtree(staging, ignore_errors=True)
    _UNPACKED[packed.sha256] = final
    return final


def _worker_settings(payload: Payload) -> Any:
    settings = payload.settings.replace(suite=None, batch=None)
    if payload.suite is not None:
        root = _cached(payload.suite)
        settings = settings.replace(suite=tuple(str(root / n) for n in payload.suite_names))
    if payload.fixtures is not None:
        settings = settings.replace(fixtures=str(_cached(payload.fixtures)))
    return settings


def worker_name() -> str:
    """The Dask worker's address (a restarted worker gets a new one), or host:pid."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class TaskResult:
    """What comes back from a worker: the submission's files as bytes."""

    name: str
    files: dict[str, bytes] = field(default_factory=dict)
    error: str | None = None
    worker: str = ""
    host: str = ""
    seconds: float = 0.0


def grade_archive(archive: bytes, name: str, digest: str, payload: Payload) -> TaskResult:
    """The Dask task: unpack one submission, grade it, return its files."""
    from lmspec.conformance.target import TargetError, adapter_files, find_adapter, resolve
    from lmspec.tools.grade.grading import NotGraded, grade
    from lmspec.tools.grade.outputs import write_outputs

    start = time.monotonic()
    result = TaskResult(name, worker=worker_name(), host=socket.gethostname())
    if not _OWN_DIGEST:
        _OWN_DIGEST.append(code_digest())
    if _OWN_DIGEST[0] != payload.lmspec_digest:
        result.error = (
            f"this worker's lmspec ({_OWN_DIGEST[0][:12]}) is not the client's ({payload.lmspec_digest[:12]}): "
            "install the same lmspec on every worker"
        )
        return result
    base = Path(tempfile.mkdtemp(prefix="lmspec-grade-"))
    try:
        # the submission keeps its name: it is the implementation's name in every report
        sub = base / "submissions" / name
        unpack(archive, sub)
        adapter = find_adapter(sub)
        if adapter is None:
            result.error = f"no adapters file found (looked for {', '.join(adapter_files())})"
            return result
        out = base / "out"
        settings = _worker_settings(payload)
        unpacked = time.monotonic()
        try:
            target = resolve(str(adapter), settings.profile, python=settings.python)
            report = grade(target, out=out, settings=settings, points=payload.points)
        except TargetError as exc:
            result.error = f"not graded: {exc}"
            return result
        except NotGraded as exc:
            result.error = f"not graded: {exc}"
            return result
        graded = time.monotonic()
        rel = adapter.relative_to(sub).as_posix()
        report.implementation.update(name=name, adapter=f"{name}/{rel}")  # not the worker's temporary path
        batch = {
            "content_hash": digest,
            "adapter": rel,
            "worker": result.worker,
            "host": result.host,
            "unpack_s": round(unpacked - start, 3),  # and the shared archives, on a worker's first task
            "grade_s": round(graded - unpacked, 2),
            "task_s": round(time.monotonic() - start, 2),  # the reports are written after this
        }
        formats = tuple(dict.fromkeys((*payload.formats, "json")))  # the batch resumes from results.json
        write_outputs(report, out, formats, payload.points, batch=batch, spec_href="../spec.html")
        for path in sorted(out.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                data = path.read_bytes()
                result.files[str(path.relative_to(out))] = data[:LOG_CAP] if path.suffix == ".log" else data
        return result
    finally:
        result.seconds = time.monotonic() - start
        with contextlib.suppress(OSError):
            shutil.rmtree(base)


def stop_judges() -> int:
    """Kill the judges this process started (and, with their process groups,
    their sandboxed submissions): a judge runs in a session of its own, so it
    would outlive a worker that is shut down mid-grading."""
    import psutil

    stopped = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if "--lmspec-report" in child.cmdline():
                os.killpg(child.pid, signal.SIGKILL)
                stopped += 1
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return stopped


def stop_judges_plugin() -> Any:
    """A Dask worker plugin: when a worker closes (the batch interrupted, the
    cluster shut down), the gradings it was running stop too."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class StopJudgesOnClose(WorkerPlugin):
        name = "lmspec-stop-judges"

        def teardown(self, worker: Any) -> None:
            stop_judges()

    return StopJudgesOnClose()


# --- on the client -------------------------------------------------------------------------------
def open_client(scheduler: str | None, workers: int, *, quiet: bool) -> tuple[Any, Any]:
    """A Dask client: on the cluster at ``scheduler``, or on a LocalCluster
    of ``workers`` processes with one thread each (a grading is one judge
    process, and the GIL makes threads in one worker pointless)."""
    import logging

    from distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler, timeout="60s"), None
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        # the scheduler's HTTP server (health, metrics, the dashboard if bokeh is there) on a free
        # loopback port: Dask's default, 8787, is taken by the first of two batches run at once
        dashboard_address="127.0.0.1:0",
        silence_logs=logging.ERROR if quiet else logging.WARNING,
    )
    return Client(cluster), cluster


def total_threads(client: Any) -> int:
    return sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values())
