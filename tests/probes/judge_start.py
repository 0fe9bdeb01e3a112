"""A pytest plugin the judge-start meta-test (tests/test_judge_start.py)
loads into a judge run (``-p judge_start``, first): each judge process
writes into the folder LMSPEC_START_PROBE names when it first imported torch
and when its sandboxed worker was started (both on the monotonic clock),
whether its tests used that very worker, whether the worker has ended when
the process ends, and whether the process imported torch at all."""

import json
import os
import sys
import time
from importlib.abc import MetaPathFinder
from pathlib import Path
from typing import Any

import pytest

_TORCH_BEFORE_PROBE = "torch" in sys.modules
_torch_at: list[float] = []
_record: dict[str, Any] = {}
_early: list[Any] = []


class _Clock(MetaPathFinder):
    """Notes when torch is first imported (and finds nothing: the import goes on as usual)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" and not _torch_at:
            _torch_at.append(time.monotonic())


sys.meta_path.insert(0, _Clock())


@pytest.hookimpl(trylast=True)  # after lmspec's plugin has made its session and started the worker
def pytest_configure(config: pytest.Config) -> None:
    session = config._lmspec_session  # type: ignore[attr-defined]
    early = session._early
    _early.append(early)
    _record.update(
        role="xdist-worker" if hasattr(config, "workerinput") else "judge",
        pid=os.getpid(),
        torch_before_probe=_TORCH_BEFORE_PROBE,
        worker_started_at=early.started_at if early is not None else None,
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    impl = session.config._lmspec_session.impl  # type: ignore[attr-defined]
    _record["used_the_early_worker"] = impl is not None and _early[0] is not None and impl.channel is _early[0]
    _record["worker_starts"] = len(impl.startups) if impl is not None else 0


@pytest.hookimpl(trylast=True)  # after lmspec's plugin has ended the worker
def pytest_unconfigure(config: pytest.Config) -> None:
    early = _early[0] if _early else None
    _record["torch_at"] = _torch_at[0] if _torch_at else None
    _record["torch_imported"] = "torch" in sys.modules
    _record["worker_ended"] = early is None or early.proc.poll() is not None
    folder = Path(os.environ["LMSPEC_START_PROBE"])
    (folder / f"{os.getpid()}.json").write_text(json.dumps(_record))
