"""One judge process's view of the run: the settings, the target, its
profile, how its worker is started, and the implementation (started on
first use). The plugin keeps one ``JudgeSession`` on the pytest config;
the report reads it.
"""

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lmspec.conformance import profiles
from lmspec.conformance.fixtures import FixtureSet
from lmspec.conformance.judge.faults import WorkerFault
from lmspec.conformance.judge.sandbox import WorkerSpec, resolve
from lmspec.conformance.target import Target, TargetError
from lmspec.conformance.target import resolve as resolve_target

if TYPE_CHECKING:
    from lmspec.conformance.judge.channel import ProcessChannel
    from lmspec.conformance.judge.implementation import Implementation

IN_PROCESS_WARNING = "--in-process: the implementation ran INSIDE the judge (debugging only, not grading)"


class JudgeSession:
    """The state of one judge process (see the module docstring)."""

    def __init__(self, settings: Any, session_dir: Path, *, xdist_worker: bool):
        self.settings = settings
        self.session_dir = session_dir
        if settings.lmspec_target:
            self.target = Target.load(settings.lmspec_target)
        else:
            try:
                self.target = resolve_target(settings.adapter, settings.profile, python=settings.python)
            except TargetError as exc:
                import pytest

                raise pytest.UsageError(str(exc)) from None
        if self.target.problem:
            import pytest

            raise pytest.UsageError(f"{self.target.given}: not graded: {self.target.problem}")
        sandbox, warning = resolve(settings.sandbox)
        if self.target.detected_by == "star-import":
            self.target = probe_profile(self.target, settings)
        self.profile = profiles.get(self.target.profile)
        self.in_process = bool(settings.in_process)
        self.warnings = [warning] if warning and not self.in_process else []
        if self.in_process:
            self.warnings.append(IN_PROCESS_WARNING)
        self.fixtures = FixtureSet.default(settings.fixtures, self.target.root)
        environment = self.target.environment or {}  # --env auto: the grader's own record of it
        threads = 1 if xdist_worker or os.cpu_count() == 1 else 2
        self.spec = WorkerSpec(
            adapter=self.target.adapter,
            root=self.target.root,
            python=self.target.python or settings.python or sys.executable,
            sandbox=sandbox,
            memory_gb=settings.memory_limit or None,
            threads=threads,
            cuda=settings.device in ("cuda", "all", "auto") and _cuda_available(),
            allow_reference=bool(settings.allow_reference) or self.target.is_reference,
            binder=self.profile.binder,
            data=tuple((name, str(self.fixtures.path(name))) for name in self.profile.data if self.fixtures.has(name)),
            venv=environment.get("venv"),
            base_python=environment.get("base_python"),
            hidden=self.target.hidden,
        )
        self.impl: Implementation | None = None
        self.start_error: BaseException | None = None
        self._early: ProcessChannel | None = None  # the worker, started ahead of its first use

    @property
    def root(self) -> Path | None:
        return self.target.root

    def start_early(self) -> None:
        """Start the worker now, ahead of its first use: its Python, torch and the submission load
        while this judge imports torch and collects (2-4 s of wall time each on 2 cores, which
        otherwise followed one another). Not for --in-process; a worker that cannot be started here is
        started again at first use, which reports why."""
        if self.in_process or self.impl is not None or self.start_error is not None or self._early is not None:
            return
        from lmspec.conformance.judge.channel import ProcessChannel

        with contextlib.suppress(Exception):
            self._early = ProcessChannel(self.spec, self.settings.startup_timeout)

    def close(self) -> None:
        """End the worker (started or started early)."""
        if self.impl is not None:
            self.impl.close()
        if self._early is not None:
            self._early.kill()
            self._early = None

    def implementation(self, on_first_start: Callable[["JudgeSession"], None] | None = None) -> "Implementation":
        """The implementation under test, started on first use (its start
        error, raised again for every test that needs it)."""
        from lmspec.conformance.judge.implementation import Implementation  # torch: see the plugin's imports

        if self.impl is None and self.start_error is None:
            try:
                self.impl = Implementation(
                    self.spec,
                    {f.name: f for f in self.profile.functions},
                    in_process=self.in_process,
                    call_timeout=self.settings.timeout_per_call,
                    startup_timeout=self.settings.startup_timeout,
                    session_dir=self.session_dir,
                    warnings=tuple(self.warnings),
                    early=self._early,
                )
            except BaseException as exc:
                self.start_error = exc
                if self._early is not None:
                    self._early.kill()  # whether or not the connection took it (and killed it already)
            finally:
                self._early = None
            if on_first_start is not None:
                on_first_start(self)
        if self.start_error is not None:
            raise self.start_error
        assert self.impl is not None
        return self.impl


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def probe_profile(target: Target, settings: Any) -> Target:
    """A file whose names a static read cannot tell (``from mine import *``,
    ``target.detected_by == "star-import"``: its callers ask only then): ask a
    sandboxed worker which names the module defines, and take the profile they
    identify (the default when none)."""
    sandbox, _ = resolve(settings.sandbox)
    environment = target.environment or {}  # --env auto: bound, never run on the host
    spec = WorkerSpec(
        adapter=target.adapter,
        root=target.root,
        python=target.python or settings.python or sys.executable,
        sandbox=sandbox,
        memory_gb=settings.memory_limit or None,
        allow_reference=bool(settings.allow_reference),
        venv=environment.get("venv"),
        base_python=environment.get("base_python"),
        hidden=target.hidden,
    )
    from lmspec.conformance.judge.implementation import Implementation

    try:
        probe = Implementation(spec, {}, startup_timeout=settings.startup_timeout)
    except (Exception, WorkerFault):  # the real start reports why it cannot load (WorkerFault: a BaseException)
        return target.with_(detected_by="default")
    try:
        found = profiles.detect(probe.ready.get("functions") or [])
    finally:
        probe.close()
    if found is None:
        return target.with_(detected_by="default")
    return target.with_(profile=found.name, detected_by="worker")
