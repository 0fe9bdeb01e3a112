"""A suite the host-path meta-test (tests/test_host_paths.py) gives the judge
with ``--suite``: each test writes where the process running it imports
from (its working folder, sys.path, and the files of pytest, torch and numpy)
into the folder LMSPEC_HOST_PROBE names, one file per process. Run once by
the judge itself (--jobs 1) and once by pytest-xdist's workers (--jobs 2)."""

import json
import os
import sys
from pathlib import Path

import numpy
import pytest
import torch


def _record() -> None:
    folder = Path(os.environ["LMSPEC_HOST_PROBE"])
    record = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "path": sys.path,
        "modules": {m.__name__: m.__file__ for m in (numpy, pytest, torch)},
    }
    (folder / f"{os.getpid()}.json").write_text(json.dumps(record))


@pytest.mark.parametrize("n", range(4))
def test_where_this_process_imports_from(n: int) -> None:
    _record()
