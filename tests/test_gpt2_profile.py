"""The gpt2 profile end to end: a reader's file written the book's way is
recognised without --profile and gets full marks; the binder's offline GPT-2
encoding equals the oracle's."""

import json
from pathlib import Path

import pytest
from grader_run import grade_once, run_grader

from lmspec.conformance.target import resolve

REPO = Path(__file__).resolve().parent.parent
READER = REPO / "tests" / "fixture_repos" / "gpt2_reader" / "previous_chapters.py"


def test_reader_file_is_recognised_as_gpt2() -> None:
    target = resolve(str(READER))
    assert (target.profile, target.detected_by) == ("gpt2", "names")


def test_reader_folder_finds_previous_chapters() -> None:
    target = resolve(str(READER.parent))
    assert target.profile == "gpt2" and target.adapter.endswith("previous_chapters.py")


def test_binder_encoding_equals_the_oracle(fixtures_dir) -> None:
    from lmspec.conformance.gpt2 import oracles
    from lmspec.conformance.judge.worker.binders import gpt2

    vocab = fixtures_dir / "gpt2_vocab.json"
    text = "Hello, world! <|endoftext|> Numbers 1234 and   spaces\n\ttabs."
    ours = oracles.gpt2_encoding(vocab).encode(text, allowed_special={"<|endoftext|>"})
    assert gpt2.gpt2_encoding(vocab).encode(text, allowed_special={"<|endoftext|>"}) == ours
    assert ours[:4] == [15496, 11, 995, 0]


@pytest.mark.slow
def test_reader_file_gets_full_marks(shared_gradings: Path) -> None:
    """The book's code, as a reader keeps it in one file, graded without an adapter: 20/20.
    (The same grading is test_intake's reference: graded once per run.)"""
    rc, output, _, out = grade_once(shared_gradings, "gpt2_reader", "--adapter", str(READER), "--jobs", "2")
    data = json.loads((out / "results.json").read_text())
    failing = [
        (i["id"], i["status"], i["explanation"])
        for i in data["items"]
        if i["group"] == "core" and i["status"] != "pass"
    ]
    assert not failing, f"{failing}\n{output}"
    assert data["profile"] == "gpt2"
    assert data["score"] == data["max_score"] == 20 and rc == 0, output


RENAMED = REPO / "tests" / "fixture_repos" / "gpt2_renamed" / "lmspec_gpt2.py"


def test_adapter_file_of_renamed_names_is_recognised() -> None:
    """A small file importing renamed classes under the book's names is a gpt2 submission."""
    assert resolve(str(RENAMED)).profile == "gpt2"


@pytest.mark.slow
def test_adapter_file_of_renamed_names_gets_full_marks(tmp_path: Path) -> None:
    """TinyGPT, CausalSelfAttention and sample_tokens, mapped by lmspec_gpt2.py: 20/20."""
    rc, output, _ = run_grader(tmp_path / "out", "--adapter", str(RENAMED), "--profile", "gpt2")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["score"] == data["max_score"] == 20 and rc == 0, output
