"""Intake (DESIGN.md "Intake is one step before any profile"): notebooks,
chapter folders, top-level demo code and modules that are not installed, as
readers of the book write them, never end a grading; what was left out is
said in the table and in results.json. The fixture repositories
(tests/fixture_repos/gpt2_notebook, gpt2_chapters, gpt2_demo_code,
gpt2_missing_packages) were written for lmspec after readers' habits."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from grader_run import grade_once, run_grader

from lmspec.conformance.judge.worker import intake
from lmspec.conformance.target import TargetError, resolve
from lmspec.tools.grade.intake import summary

REPO = Path(__file__).resolve().parent.parent
REPOS = REPO / "tests" / "fixture_repos"
NOTEBOOK = REPOS / "gpt2_notebook" / "GPT2.ipynb"
CHAPTERS = REPOS / "gpt2_chapters"
READER = REPOS / "gpt2_reader" / "previous_chapters.py"
BOOK_NAMES = {"GPTDatasetV1", "create_dataloader_v1", "MultiHeadAttention", "LayerNorm", "GELU", "FeedForward"}
BOOK_NAMES |= {"TransformerBlock", "GPTModel", "generate_text_simple", "calc_loss_batch", "generate"}
BOOK_NAMES |= {"load_weights_into_gpt", "GPT_CONFIG_124M"}


# --- reading, as text -----------------------------------------------------------------------------------------
def test_notebook_is_its_code_cells_with_magics_dropped_and_a_broken_cell_skipped() -> None:
    taken = intake.read(NOTEBOOK, NOTEBOOK.parent)
    record = taken.record()
    assert record["files"] == ["GPT2.ipynb"]
    assert record["magics"] == {"GPT2.ipynb": [1, 10]}, record["magics"]  # !pip / %matplotlib, %%time
    assert len(record["notes"]) == 1 and record["notes"][0].startswith("GPT2.ipynb code cell 14: skipped, it does not")
    assert taken.defined_names() >= BOOK_NAMES, BOOK_NAMES - taken.defined_names()
    left = {(x["cell"], x["code"].split("(")[0]): x["why"] for x in record["left_out"]}
    assert left[(15, "for epoch in range")] == "a loop"
    assert left[(18, "load_weights_into_gpt")] == "a call"
    assert left[(12, "model = GPTModel")] == "an assignment that calls something"
    assert left[(16, "plt.show")] == "a call"
    assert "train_losses" in taken.defined_names()  # a literal assignment in the training cell is kept


def test_definitions_only_keeps_configs_imports_and_guarded_imports() -> None:
    source = textwrap.dedent(
        """\
        import torch
        try:
            import tiktoken
        except ImportError:
            tiktoken = None
        CFG = {"emb_dim": 768, "n_heads": 12}
        SMALL = {**CFG, "emb_dim": 64}
        SIZES = [CFG[k] for k in CFG]
        model = torch.nn.Linear(2, 2)
        model.eval()
        LATER = undefined_name + 1
        cfg["x"] = 1
        if __name__ == "__main__":
            print(CFG)
        def f():
            return CFG
        """
    )
    taken = intake.Intake()
    intake._add_source(taken, source, "mine.py", None, set(), True)
    assert [p.code.splitlines()[0] for p in taken.kept()] == [
        "import torch",
        "try:",
        'CFG = {"emb_dim": 768, "n_heads": 12}',
        'SMALL = {**CFG, "emb_dim": 64}',
        "SIZES = [CFG[k] for k in CFG]",
        "def f():",
    ]
    why = {p.code.splitlines()[0]: p.why for p in taken.left_out()}
    assert why == {
        "model = torch.nn.Linear(2, 2)": "an assignment that calls something",
        "model.eval()": "a call",
        "LATER = undefined_name + 1": "an assignment over names not defined above it (undefined_name)",
        'cfg["x"] = 1': "an assignment into an object",
        'if __name__ == "__main__":': "the main block",
    }


def test_chapter_order_puts_files_without_a_number_first_and_ch10_after_ch02(tmp_path: Path) -> None:
    for name in ("ch10.ipynb", "ch02.ipynb", "previous_chapters.py", "setup.py", "test_mine.py", "ch3.py"):
        (tmp_path / name).write_text("{}" if name.endswith(".ipynb") else "")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "gpt_model.py").write_text("")
    assert [p.name for p in intake.chapter_files(tmp_path)] == [
        "previous_chapters.py",
        "ch02.ipynb",
        "ch3.py",
        "ch10.ipynb",
    ]


# --- resolving what is graded ----------------------------------------------------------------------------------
def test_a_notebook_is_a_gpt2_submission() -> None:
    target = resolve(str(NOTEBOOK))
    assert (target.profile, target.detected_by, target.adapter) == ("gpt2", "names", str(NOTEBOOK))
    assert target.is_intake


def test_a_chapter_folder_is_not_hijacked_by_an_app_module_one_level_down() -> None:
    target = resolve(str(CHAPTERS))
    assert target.adapter == str(CHAPTERS) and target.profile == "gpt2", target
    assert [f for f in intake.read(CHAPTERS, CHAPTERS).files] == ["previous_chapters.py", "ch04.ipynb", "ch05.ipynb"]


def test_a_folder_of_chapter_folders_takes_them_in_chapter_order(tmp_path: Path) -> None:
    for chapter in ("ch10", "ch04"):
        (tmp_path / chapter).mkdir()
        shutil.copy(NOTEBOOK, tmp_path / chapter / f"{chapter}.ipynb")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "gpt_model.py").write_text("class GPTModel:\n    pass\n")
    target = resolve(str(tmp_path))
    assert target.adapter == str(tmp_path) and target.profile == "gpt2", target
    assert intake.read(tmp_path, tmp_path).files == ["ch04/ch04.ipynb", "ch10/ch10.ipynb"]


def test_a_file_that_is_neither_python_nor_a_notebook_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TargetError, match="not a Python file or a notebook"):
        resolve(str(tmp_path / "notes.txt"))


# --- the worker's side: run in a process of its own (the loader changes sys.path and sys.modules) --------------
_LOAD = """
import json, sys
from pathlib import Path
from lmspec.conformance.judge.worker import loader
adapter, root = sys.argv[1], Path(sys.argv[2])
info = loader.load(adapter, root, Path(sys.argv[3]))
module = info["module"]
out = {"error": info["error"], "intake": info["intake"], "names": sorted(vars(module)) if module else []}
if module is not None and hasattr(module, "plot_losses"):
    try:
        module.plot_losses([1.0])
    except Exception as exc:
        out["used"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out, default=str))
"""


def _load(adapter: Path, root: Path, tmp_path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD, str(adapter), str(root), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_failing_demo_code_leaves_the_definitions_graded(tmp_path: Path) -> None:
    """previous_chapters.py:302 calls load_weights_into_gpt(gpt, params) before gpt exists."""
    folder = REPOS / "gpt2_demo_code"
    info = _load(folder / "previous_chapters.py", folder, tmp_path)
    assert info["error"] is None, info["error"]
    as_is = info["intake"]["as_is_error"]
    assert (as_is["type"], as_is["line"]) == ("NameError", 302), as_is
    assert set(info["names"]) >= BOOK_NAMES, BOOK_NAMES - set(info["names"])
    lines = summary(info["intake"])
    assert lines[0].startswith("previous_chapters.py did not import as is (previous_chapters.py:302: NameError"), lines
    assert lines[1] == (
        "previous_chapters.py: 2 top-level statements left out, not definitions (lines 301, 302): an assignment "
        "that calls something, a call"
    ), lines


def test_missing_modules_are_placeholders_that_fail_only_when_used(tmp_path: Path) -> None:
    folder = REPOS / "gpt2_missing_packages"
    info = _load(folder / "previous_chapters.py", folder, tmp_path)
    assert info["error"] is None and "as_is_error" not in info["intake"], info
    assert info["intake"]["placeholders"] == {
        "tensorflow": "previous_chapters.py:8",
        "wandb": "previous_chapters.py:10",
    }
    assert BOOK_NAMES - {"GPT_CONFIG_124M"} <= set(info["names"])
    assert info["used"] == (
        "ModuleNotFoundError: wandb is not installed where lmspec ran (No module named 'wandb'): wandb.init was "
        "bound to a placeholder, and using it fails"
    )
    assert summary(info["intake"]) == [
        "not installed where lmspec ran, bound to placeholders: tensorflow (imported at previous_chapters.py:8), "
        "wandb (imported at previous_chapters.py:10); the names that use them fail when used (their items say so), "
        "the others were graded"
    ]


def test_a_misspelled_module_of_the_submissions_own_is_named_with_its_likely_spelling(tmp_path: Path) -> None:
    """``import my_utilz`` beside my_utils.py: a typo, not a package to install; the message names the file meant."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "my_utils.py").write_text("def smooth(xs):\n    return xs\n")
    (repo / "mine.py").write_text("import my_utilz\n\ndef plot_losses(xs):\n    return my_utilz.smooth(xs)\n")
    info = _load(repo / "mine.py", repo, tmp_path)
    assert info["intake"]["placeholders"] == {"my_utilz": "mine.py:1"}, info
    assert info["used"] == (
        "ModuleNotFoundError: my_utilz is not installed where lmspec ran, nor a module of the submission (No "
        "module named 'my_utilz'; did you mean my_utils?): my_utilz.smooth was bound to a placeholder, and using "
        "it fails"
    )


def test_an_import_with_a_fallback_of_its_own_gets_no_placeholder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mine.py").write_text(
        "try:\n    import not_installed_here\nexcept ImportError:\n    not_installed_here = None\n"
        "def f():\n    return not_installed_here\n"
    )
    info = _load(repo / "mine.py", repo, tmp_path)
    assert info["error"] is None and info["intake"] is None, info


def test_a_notebook_runs_as_one_module_of_its_definitions(tmp_path: Path) -> None:
    info = _load(NOTEBOOK, NOTEBOOK.parent, tmp_path)
    assert info["error"] is None, info["error"]
    assert set(info["names"]) >= BOOK_NAMES and "model" not in info["names"]
    assert not [x for x in info["intake"]["left_out"] if x["why"].startswith("failed when run")], info["intake"]


def test_the_table_results_json_and_html_say_what_was_left_out() -> None:
    """The worker's record (here: the notebook's, read on this side) becomes
    the summary in results.json, ``intake:`` lines in the table and banners in
    the HTML report."""
    import datetime

    from lmspec.conformance.target import Target
    from lmspec.tools.grade import html, points, report, results

    record = intake.read(NOTEBOOK, NOTEBOOK.parent).record() | {"placeholders": {"tensorflow": "GPT2.ipynb#cell2:4"}}
    graded = results.build_report(
        {"tests": [], "sandbox": "bwrap", "intake": record},
        points=points.PointsTable(),
        target=Target(str(NOTEBOOK), str(NOTEBOOK), NOTEBOOK.parent, "gpt2_notebook", "gpt2"),
        started=datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC),
        duration_s=1.0,
        settings={},
    )
    lines = graded.to_json()["implementation"]["intake"]["summary"]
    assert lines[0] == "graded: GPT2.ipynb (code cells 2, 4, 6, 8-9, 11, 13, 15, 17): their definitions", lines
    assert lines[1].startswith("GPT2.ipynb: 19 top-level statements left out, not definitions (code cells 3, 5, 7,")
    assert "magic and shell lines dropped (code cells 1, 10)" in lines[2] and "cell 14: skipped" in lines[3]
    assert lines[4].startswith("not installed where lmspec ran, bound to placeholders: tensorflow (imported at GPT2")
    table = report.render_table(graded, width=400)
    assert all(f"  intake: {line}" in table for line in lines), table
    page = html.render_report(json.loads(json.dumps(graded.to_json())))
    assert page.count('<p class="banner intake">intake: ') == len(lines), page


# --- end to end ------------------------------------------------------------------------------------------------
def _items(out: Path) -> tuple[dict, dict[str, str]]:
    data = json.loads((out / "results.json").read_text())
    return data, {i["id"]: i["status"] for i in data["items"]}


@pytest.mark.slow
def test_a_notebook_and_a_chapter_folder_grade_as_the_same_code_in_one_file(
    tmp_path: Path, shared_gradings: Path
) -> None:
    """The same items and verdicts as gpt2_reader/previous_chapters.py (its grading is
    test_gpt2_profile's, done once per run); the table names the files graded and what was left out."""
    _, _, _, file = grade_once(shared_gradings, "gpt2_reader", "--adapter", str(READER), "--jobs", "2")
    reader, expected = _items(file)
    for name, given in (("notebook", NOTEBOOK), ("chapters", CHAPTERS)):
        rc, output, _ = run_grader(tmp_path / name, "--adapter", str(given), "--jobs", "2")
        data, statuses = _items(tmp_path / name)
        assert statuses == expected and data["verdict"] == reader["verdict"], output
        assert (data["score"], rc) == (reader["score"], 0), output
        assert data["implementation"]["intake"]["summary"][0].startswith("graded: "), data["implementation"]


@pytest.mark.slow
def test_demo_code_and_missing_packages_never_end_a_grading(tmp_path: Path) -> None:
    for name in ("gpt2_demo_code", "gpt2_missing_packages"):
        rc, output, _ = run_grader(tmp_path / name, "--adapter", str(REPOS / name), "--jobs", "2")
        data = json.loads((tmp_path / name / "results.json").read_text())
        assert rc == 0 and data["score"] == data["max_score"] == 20 and data["error"] is None, output
        assert data["implementation"]["intake"]["summary"], data["implementation"]


@pytest.mark.slow
def test_a_cs336_repository_importing_wandb_at_the_top_is_graded(tmp_path: Path) -> None:
    """wandb (not installed here) imported at the top of a module the adapters import."""
    repo = tmp_path / "cs336"
    shutil.copytree(REPOS / "cs336_student", repo)
    data_py = repo / "cs336_basics" / "data.py"
    data_py.write_text("import wandb\n" + data_py.read_text())
    adapter = str(repo / "tests" / "adapters.py")
    rc, output, _ = run_grader(tmp_path / "out", "--adapter", adapter, "--spec", "2.silu,2.softmax", "--jobs", "1")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rc == 0 and data["score"] == data["max_score"] > 0, output
    assert data["implementation"]["intake"]["placeholders"] == {"wandb": "cs336_basics/data.py:1"}
    assert data["implementation"]["intake"]["summary"] == [
        "not installed where lmspec ran, bound to placeholders: wandb (imported at cs336_basics/data.py:1); the "
        "names that use them fail when used (their items say so), the others were graded"
    ]
