"""``--env auto`` on a machine whose pip uses a local package mirror as a
``file://`` index (issue 27): the index's pages link to files beside it
(``simple/NAME/index.html`` -> ``../../files/NAME.whl``), and the download
step's sandbox must be given those folders as well as the index. The mirror
is built here, with a small wheel written by the test."""

import base64
import hashlib
import json
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from grader_run import run_grader

from lmspec.tools.grade import envs

WHEEL_NAME = "lmspec_tinydep"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_mirror(base: Path) -> Path:
    """``base/simple`` (the index) and ``base/files`` (a pure-Python wheel of
    ``lmspec-tinydep`` 1.0, whose ``twice(x)`` returns ``2 * x``); the index URL."""
    files, page = base / "files", base / "simple" / "lmspec-tinydep"
    files.mkdir(parents=True)
    page.mkdir(parents=True)
    wheel = files / f"{WHEEL_NAME}-1.0-py3-none-any.whl"
    info = f"{WHEEL_NAME}-1.0.dist-info"
    members = {
        f"{WHEEL_NAME}/__init__.py": b"def twice(x):\n    return 2 * x\n",
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: lmspec-tinydep\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: lmspec-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (page / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>'
        "</body></html>\n"
    )
    (base / "simple" / "index.html").write_text(
        '<html><body><a href="lmspec-tinydep/">lmspec-tinydep</a></body></html>'
    )
    return base / "simple"


def test_a_file_index_brings_the_folder_its_pages_link_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = build_mirror(tmp_path / "mirror")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", index.as_uri())
    env, folders = envs.pip_configuration(sys.executable)
    assert env["PIP_EXTRA_INDEX_URL"] == index.as_uri()
    assert str(index) in folders and str(tmp_path / "mirror" / "files") in folders, folders


def test_links_to_other_sites_and_into_the_index_itself_bring_nothing(tmp_path: Path) -> None:
    index = tmp_path / "simple"
    (index / "a").mkdir(parents=True)
    (index / "a" / "a-1.0.tar.gz").write_text("")
    (index / "a" / "index.html").write_text(
        '<a href="https://example.org/files/a-1.0.whl">x</a> <a href="a-1.0.tar.gz">y</a>'
    )
    assert envs.index_file_folders(index) == []


@pytest.mark.slow
def test_env_auto_installs_from_a_file_index_mirror(tmp_path: Path) -> None:
    """A repository declaring lmspec-tinydep, found only in a file:// mirror
    (no find-links, no other index): --env auto installs it and the item passes."""
    index = build_mirror(tmp_path / "mirror")
    repo = tmp_path / "repo"
    (repo / "tiny_model").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [project]
            name = "tiny-model"
            version = "0.1.0"
            requires-python = ">=3.11"
            dependencies = ["lmspec-tinydep>=1.0"]
            """
        )
    )
    (repo / "tiny_model" / "__init__.py").write_text(
        "import torch\nfrom lmspec_tinydep import twice\n\n\ndef silu(x):\n    return twice(x * torch.sigmoid(x)) / 2\n"
    )
    (repo / "tests" / "adapters.py").write_text(
        "from tiny_model import silu\n\n\ndef run_silu(in_features):\n    return silu(in_features)\n"
    )
    env = {"PIP_INDEX_URL": index.as_uri(), "PIP_EXTRA_INDEX_URL": None, "PIP_FIND_LINKS": None}
    env |= {"PIP_CONFIG_FILE": "/dev/null"}
    args = ("--adapter", str(repo / "tests" / "adapters.py"), "--spec", "2.silu", "--jobs", "1")
    args += ("--env", "auto", "--env-cache", str(tmp_path / "envs"))
    rc, output, _ = run_grader(tmp_path / "out", *args, env=env)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    environment = data["implementation"]["environment"]
    assert rc == 0 and data["score"] == data["max_score"] > 0, (output, environment)
    assert environment["installed"] == ["lmspec-tinydep>=1.0"], environment


def test_an_environment_missing_files_its_records_name_says_so(tmp_path: Path) -> None:
    """A distribution whose RECORD names files that are not on disk (an
    install cut short): a note names it and how many files are missing."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "bigpkg" / "python").mkdir(parents=True)
    (site / "bigpkg" / "__init__.py").write_text("")
    info = site / "bigpkg-2.16.1.dist-info"
    info.mkdir()
    rows = ["bigpkg/__init__.py,,", "bigpkg/python/__init__.py,,", "bigpkg/python/ops.py,,", "../../bin/big,,"]
    (info / "RECORD").write_text("\n".join([*rows, "bigpkg-2.16.1.dist-info/RECORD,,"]) + "\n")
    whole = site / "small-1.0.dist-info"
    whole.mkdir()
    (whole / "RECORD").write_text("small-1.0.dist-info/RECORD,,\n")
    assert envs.incomplete_distributions(tmp_path / "venv") == [
        "installed but incomplete: bigpkg 2.16.1: 2 of the 4 files its RECORD names are missing (e.g. "
        f"bigpkg/python/__init__.py); imports of it fail: remove the environment ({tmp_path / 'venv'}) and grade "
        "again to rebuild it"
    ]
