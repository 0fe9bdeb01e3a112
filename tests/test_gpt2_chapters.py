"""Readers of the book as they progress (issue 27): a missing name is said in
the book's words, with its near misses; an item of which only a part is
written is "not implemented", never "fail"; the verdict covers the chapters
a reader has started, and ``--chapters`` makes named chapters count in full.
The table, results.json, the HTML report and Gradescope say the same."""

import datetime
import json
import types
from pathlib import Path

import pytest
import torch
from grader_run import run_grader

from lmspec.conformance.judge.worker.binders import gpt2 as binder
from lmspec.conformance.outcomes import Outcome
from lmspec.conformance.profiles import get
from lmspec.conformance.report import summary
from lmspec.conformance.target import Target
from lmspec.tools.grade import points, results
from lmspec.tools.grade.gradescope import build as gradescope
from lmspec.tools.grade.html import render_report as render_html
from lmspec.tools.grade.report import render_table

REPO = Path(__file__).resolve().parent.parent
CHAPTER4 = REPO / "tests" / "fixture_repos" / "gpt2_chapter4" / "previous_chapters.py"
CHAPTER5 = ("gpt2.loss", "gpt2.generate", "gpt2.load_weights")


# --- the book's names in messages ---------------------------------------------------------
class TransformerBlocks(torch.nn.Module):  # a reader's plural
    def __init__(self, cfg):
        super().__init__()


def make_loader(txt, batch_size, max_length, stride, shuffle, drop_last, num_workers):
    """create_dataloader_v1 under another name, with the book's arguments."""


def _module(**names) -> types.ModuleType:
    module = types.ModuleType("previous_chapters")
    module.__file__ = "/somewhere/previous_chapters.py"
    for name, value in names.items():
        setattr(module, name, value)
    return module


def test_missing_class_is_said_with_the_books_name_and_its_near_miss() -> None:
    said = binder.absent(_module(TransformerBlocks=TransformerBlocks))["gpt2_block"]
    assert said == (
        "no class TransformerBlock in previous_chapters.py (the book's name, chapter 4); "
        "found TransformerBlocks: rename it, or map it in a small file (README)"
    )


def test_near_miss_by_arguments_shows_them() -> None:
    said = binder.absent(_module(make_loader=make_loader))["gpt2_dataloader"]
    assert said.startswith("no function create_dataloader_v1 in previous_chapters.py (the book's name, chapter 2)")
    assert "found make_loader(txt, batch_size, max_length, stride, shuffle, drop_last, num_workers)" in said


def test_missing_name_without_near_miss_and_bound_names_absent_from_the_list() -> None:
    reasons = binder.absent(_module(GELU=TransformerBlocks, GPTModel=TransformerBlocks))
    assert reasons["gpt2_generate"] == "no function generate in previous_chapters.py (the book's name, chapter 5)"
    assert "gpt2_gelu" not in reasons  # a name that is there needs no reason
    assert reasons["gpt2_lr_and_clip"].endswith("(the book's name, appendix D)")


def test_the_not_implemented_skip_says_the_books_words() -> None:
    from lmspec.conformance.judge.faults import NotImplementedByAdapter

    said = "no class TransformerBlock in previous_chapters.py (the book's name, chapter 4)"
    assert str(NotImplementedByAdapter("gpt2_block", False, said=said)) == f"not implemented: {said}"
    assert str(NotImplementedByAdapter("gpt2_block", False)) == "not implemented: gpt2_block"


# --- parts of an item ---------------------------------------------------------------------
def _t(outcome: str, message: str = "", spec: str = "gpt2.dataset") -> results.TestResult:
    nodeid = f"conformance/gpt2/test_x.py::test_{outcome}"
    return results.TestResult(nodeid, spec, "must", Outcome(outcome), message, message)


def test_an_item_partly_written_is_not_implemented_and_names_the_absent_part() -> None:
    """GPTDatasetV1 written and right, create_dataloader_v1 not written: not "fail"."""
    absent = "not implemented: no function create_dataloader_v1 in previous_chapters.py (the book's name, chapter 2)"
    tests = [_t("passed"), _t("passed"), _t("not_implemented", absent)]
    got = results.verdict(tests, extended=False, audit=False)
    assert got.status == results.Status.NOT_IMPLEMENTED
    assert got.explanation == f"partly written: 2 of 3 tests ran and passed; the others could not run: {absent}"
    wrong = results.verdict([_t("failed", "wrong windows"), _t("not_implemented", absent)], extended=False, audit=False)
    assert wrong.status == results.Status.FAIL  # what is there and wrong still fails


# --- the verdict by chapter ---------------------------------------------------------------
def _report(outcomes: dict[str, str | tuple[str, ...]], chapters: set[str] | None = None) -> results.GradeReport:
    """A gpt2 report from each item's outcome (or outcomes: one test each)."""
    said = {"not_implemented": "not implemented: no function generate in previous_chapters.py"}
    judge = {
        "tests": [
            {
                "nodeid": f"conformance/gpt2/test_x.py::test_{item}",
                "spec": item,
                "strength": "must",
                "outcome": outcome,
                "message": said.get(outcome, ""),
                "summary": summary(said.get(outcome, "")),
            }
            for item, each in outcomes.items()
            for outcome in ((each,) if isinstance(each, str) else each)
        ],
        "sandbox": "bwrap",
        "compromised": [],
        "warnings": [],
        "faults": [],
    }
    return results.build_report(
        judge,
        points=points.PointsTable.default("gpt2"),
        target=Target("previous_chapters.py", "/x/previous_chapters.py", None, "reader", "gpt2"),
        started=datetime.datetime.now(datetime.UTC),
        duration_s=1.0,
        settings={},
        chapters=chapters,
    )


def _outcomes(**changes: str) -> dict[str, str]:
    core = [i.id for i in get("gpt2").items if i.kind.value == "core"]
    base = {i: ("not_implemented" if i in CHAPTER5 else "passed") for i in core}
    return {**base, **{k.replace("_", ".", 1): v for k, v in changes.items()}}


def test_a_reader_after_chapter_4_passes_on_the_chapters_started() -> None:
    """Chapters 2–4 written and right, chapter 5 not started: PASS, 14/20 kept."""
    report = _report(_outcomes())
    assert report.chapters_line() == "chapters 2–4: PASS (14/14); chapter 5: not started"
    assert (report.passed, report.verdict, report.score, report.max_score) == (True, "PASS", 14, 20)
    assert report.verdict_line() == "PASS (chapters 2–4: PASS (14/14); chapter 5: not started)"
    data = report.to_json()
    assert data["chapters_line"] == report.chapters_line() and data["verdict"] == "PASS"
    assert [c["status"] for c in data["chapters"]] == ["pass", "pass", "pass", "not started"]
    table = render_table(report, color=False)
    assert "verdict: PASS (chapters 2–4: PASS (14/14); chapter 5: not started)" in table
    assert "score 14/20 (70.0%)" in table
    assert "chapters 2–4: PASS (14/14); chapter 5: not started" in render_html(json.loads(json.dumps(data)))
    assert "verdict: PASS (chapters 2–4: PASS (14/14); chapter 5: not started)" in gradescope(report)["output"]


def test_chapters_named_count_in_full() -> None:
    """``--chapters 2-5``: chapter 5 not started is a FAIL (an instructor assigned it)."""
    report = _report(_outcomes(), chapters={"2", "3", "4", "5"})
    assert (report.passed, report.verdict) == (False, "FAIL")
    assert report.chapters_line() == (
        "chapters 2–4: PASS (14/14); chapter 5: not started (0/6) (named by --chapters: counted in full)"
    )
    assert report.to_json()["chapters"][-1]["counted_in_full"] is True
    assert _report(_outcomes(), chapters={"2", "3", "4"}).passed  # the chapters named are done


def test_a_chapter_in_progress_is_not_a_failure_but_a_wrong_item_is() -> None:
    in_progress = _report(_outcomes(gpt2_generate_simple="not_implemented"))
    assert in_progress.passed
    assert in_progress.chapters_line() == (
        "chapters 2–3: PASS (5/5); chapter 4: in progress (8/9); chapter 5: not started"
    )
    failing = _report(_outcomes(gpt2_block="failed"))
    assert (failing.passed, failing.verdict) == (False, "FAIL")
    assert "chapter 4: FAIL (7/9)" in failing.chapters_line()
    nothing = _report(dict.fromkeys(_outcomes(), "not_implemented"))
    assert (nothing.passed, nothing.verdict) == (False, "FAIL")
    assert nothing.chapters_line() == "chapters 2–5: not started"


def test_a_chapter_with_an_item_partly_written_is_in_progress() -> None:
    """GPTDatasetV1 written and right, create_dataloader_v1 not yet: chapter 2 is started."""
    outcomes: dict[str, str | tuple[str, ...]] = dict.fromkeys(_outcomes(), "not_implemented")
    outcomes["gpt2.dataset"] = ("passed", "not_implemented")
    report = _report(outcomes)
    assert report.items[0].status == results.Status.NOT_IMPLEMENTED
    assert (report.passed, report.verdict, report.score) == (True, "PASS", 0)  # nothing wrong, little done
    assert report.chapters_line() == "chapter 2: in progress (0/2); chapters 3–5: not started"


def test_chapters_option_is_checked() -> None:
    assert results.parse_chapters("2-5") == {"2", "3", "4", "5"}
    assert results.parse_chapters("2,4-5") == {"2", "4", "5"}
    for bad in ("two", "5-2", "2-"):
        with pytest.raises(ValueError, match="--chapters"):
            results.parse_chapters(bad)
    assert "no chapter 9 in profile gpt2" in " ".join(_report(_outcomes(), chapters={"9"}).warnings)


def test_profiles_without_chapters_keep_their_verdict() -> None:
    assert not get("cs336").chapters and not get("encdec").chapters


@pytest.mark.slow
def test_a_reader_after_chapter_4_graded_end_to_end(tmp_path: Path) -> None:
    """The fixture reader who stopped after chapter 4: PASS on chapters 2–4,
    14/20, chapter 5's names said in the book's words, in every output."""
    out = tmp_path / "out"
    rc, output, _ = run_grader(out, "--adapter", str(CHAPTER4), "--jobs", "2", "--format", "json,html,gradescope")
    data = json.loads((out / "results.json").read_text())
    line = "chapters 2–4: PASS (14/14); chapter 5: not started"
    assert (rc, data["verdict"], data["score"], data["chapters_line"]) == (0, "PASS", 14, line), output
    generate = next(i for i in data["items"] if i["id"] == "gpt2.generate")
    assert generate["status"] == "not implemented"
    assert generate["explanation"] == (
        "not implemented: no function generate in previous_chapters.py (the book's name, chapter 5)"
    )
    assert line in (out / "report.html").read_text()
    assert line in json.loads((out / "gradescope_results.json").read_text())["output"]


def test_a_bad_chapters_option_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from lmspec.tools.grade import cli

    assert cli.main(["--out", str(tmp_path / "out"), "--chapters", "two", str(CHAPTER4)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "lmspec grade: error: --chapters 'two': expected chapter numbers such as 2-5 or 2,4 (see lmspec grade --help)\n"
    )
    assert not (tmp_path / "out").exists()
