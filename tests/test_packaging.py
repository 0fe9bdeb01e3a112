"""The installed product: the wheel holds one top-level name (lmspec) with
its data (snapshots, the spec), and ``lmspec grade`` works from it, outside
any checkout; the spec document shipped in the product is the one in
../shared (kept in step)."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lmspec.conformance.judge.sandbox import bwrap_problem
from lmspec.conformance.profiles import all_profiles
from lmspec.tools import spec

ITEMS = [i for p in all_profiles() for i in p.items]

REPO = Path(__file__).resolve().parent.parent
SHARED_SPEC = REPO.parent / "shared" / "SPEC.md"


def test_spec_in_the_product_is_the_shared_one() -> None:
    """docs/SPEC.md is ../shared/SPEC.md, byte for byte (when ../shared is there)."""
    if not SHARED_SPEC.is_file():
        pytest.skip("../shared/SPEC.md is not beside this checkout")
    assert (REPO / "docs" / "SPEC.md").read_bytes() == SHARED_SPEC.read_bytes(), (
        "docs/SPEC.md differs from ../shared/SPEC.md: copy the shared one over it"
    )


def test_every_spec_item_has_its_part_of_the_spec() -> None:
    """lmspec spec ITEM finds the rule of every item the suite checks."""
    document = spec.text()
    for item in ITEMS:
        section = spec.section(item.id, document)
        assert section.startswith(item.anchor), item.id
    page = spec.render_html(document)
    assert all(f'id="{item.id}"' in page for item in ITEMS)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, unpacked as pip installs it."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next(tmp.glob("lmspec-*.whl"))
    target = tmp / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    return target


def test_wheel_claims_only_lmspec(installed: Path) -> None:
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top == {"lmspec"}, top
    assert (installed / "lmspec" / "snapshots" / "MANIFEST").is_file()
    assert list((installed / "lmspec" / "snapshots" / "nn").glob("*.npz"))
    assert (installed / "lmspec" / "docs" / "SPEC.md").is_file()
    assert (installed / "lmspec" / "conformance" / "judge" / "worker" / "server.py").is_file()


def test_every_package_folder_is_in_the_wheel() -> None:
    """pyproject's explicit package list names every product folder that holds Python code."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {"lmspec"}
    for top in ("reference", "conformance", "tools"):
        for init in (REPO / top).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO).parts
            folders.add(".".join(("lmspec", *parts)))
    assert folders - listed == set(), f"add to [tool.setuptools] packages: {sorted(folders - listed)}"


@pytest.mark.slow
def test_lmspec_grade_works_from_the_installed_product(installed: Path, tmp_path: Path) -> None:
    """Outside the checkout, with only the installed lmspec on the path: the
    command grades the reference and explains a spec item."""
    env = {k: v for k, v in os.environ.items() if k != "LMSPEC_ADAPTER"}
    env["PYTHONPATH"] = str(installed)
    probe = subprocess.run(
        [sys.executable, "-c", "import lmspec.conformance, sys; print(lmspec.conformance.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip().startswith(str(installed)), probe.stdout
    explained = subprocess.run(
        [sys.executable, "-m", "lmspec", "spec", "2.rope"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert explained.returncode == 0 and "interleaved" in explained.stdout
    graded = subprocess.run(
        [sys.executable, "-m", "lmspec", "grade", "--spec", "2.linear", "--out", str(tmp_path / "out"), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    expected_sandbox = "bwrap" if bwrap_problem() is None else "none"
    assert results["score"] == results["max_score"] == 1 and results["sandbox"] == expected_sandbox, results
    suite = (tmp_path / results["settings"]["suite"][0]).resolve()
    assert suite == (installed / "lmspec" / "conformance" / "cs336").resolve(), suite
