"""The front door (issue 23): what is not a submission is refused in one
line naming what was given and what was expected (exit 2, nothing written);
an adapters file with a syntax error is reported once, with its file and
line, without running the suite; every mistake in the arguments is one line
naming the option and the accepted values, under the program name the user
typed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmspec.tools.grade import cli

REPO = Path(__file__).resolve().parent.parent


def _grade(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lmspec grade: error: "), err
    return lines[0]


@pytest.fixture
def earlier_out(tmp_path: Path) -> Path:
    """An output folder holding an earlier grade, which a usage error must leave as it is."""
    out = tmp_path / "grade-out"
    out.mkdir()
    (out / "results.json").write_text('{"earlier": true}')
    return out


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("{tmp}/does-not-exist", "no such file or folder"),
        ("{repo}/README.md", "not a Python file"),
        ("{tmp}/empty-folder", "a folder without an adapters file"),
        ("no_such_module_anywhere", "not a file, a folder or an importable module"),
    ],
)
def test_a_bad_target_is_one_line_exit_2_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, earlier_out: Path, given: str, expected: str
) -> None:
    (tmp_path / "empty-folder").mkdir()
    given = given.format(tmp=tmp_path, repo=REPO)
    rc, out, err = _grade(capsys, given, "--out", str(earlier_out))
    line = _one_line(err)
    assert rc == 2 and not out, (rc, out)
    assert given in line and expected in line, line
    assert "expected" in line or "looked for" in line, line
    assert [p.name for p in earlier_out.iterdir()] == ["results.json"]
    assert json.loads((earlier_out / "results.json").read_text()) == {"earlier": True}


def test_a_syntax_error_is_reported_once_with_file_and_line_without_a_suite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    adapter = tmp_path / "adapters.py"
    adapter.write_text("import torch\n\n\ndef run_linear(d_in, d_out, weights, in_features:\n    return None\n")
    out = tmp_path / "out"
    rc, table, err = _grade(capsys, str(adapter), "--out", str(out), "--quiet")
    assert rc == 1, err
    data = json.loads((out / "results.json").read_text())
    assert f"{adapter}:4: SyntaxError" in data["error"], data["error"]
    assert data["implementation"]["import_error"]["line"] == 4
    assert not any(i["tests"] for i in data["items"]), "the suite ran"
    assert not (out / "logs").exists(), "the judge was started"
    rc, table, err = _grade(capsys, str(adapter), "--out", str(out))
    assert table.count("SyntaxError") == 1, table


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--jobs", "0"], "--jobs 0: expected a number of judge processes >= 1"),
        (["--jobs", "x"], "--jobs: invalid int value: 'x'"),
        (["--spec", "9.nope"], "--spec 9.nope: matches no spec item; expected item ids or their prefixes"),
        (["--timeout", "0"], "--timeout 0: expected a number of seconds > 0"),
        (["--sandbox", "docker"], "--sandbox: invalid choice: 'docker' (choose from"),
        (["--format", "pdf"], "--format: unknown pdf (choose from table, json"),
        (["--fixtures", "{tmp}/nowhere"], "--fixtures {tmp}/nowhere: no such folder; expected a folder holding"),
        (["--fixtures", "{tmp}"], "--fixtures {tmp}: holds none of the 11 oracle files"),
    ],
)
def test_an_argument_mistake_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], named: str
) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    rc, _, err = _grade(capsys, *argv, "--out", str(tmp_path / "out"))
    line = _one_line(err)
    assert rc == 2 and named.format(tmp=tmp_path) in line, line
    assert line.endswith("(see lmspec grade --help)"), line
    assert not (tmp_path / "out").exists()


def _lmspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lmspec", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_train_bpe_mistakes_name_the_program_typed_and_an_empty_input(tmp_path: Path) -> None:
    missing = _lmspec("train-bpe", cwd=tmp_path)
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip() == (
        "error: lmspec train-bpe: the following arguments are required: input, --vocab-size, --out-dir "
        "(see lmspec train-bpe --help)"
    )
    (tmp_path / "empty.txt").write_text("")
    empty = _lmspec("train-bpe", "empty.txt", "--vocab-size", "300", "--out-dir", "tok", cwd=tmp_path)
    assert empty.returncode == 2 and "input 'empty.txt' is empty" in empty.stderr, empty.stderr
    assert not (tmp_path / "tok").exists()
    (tmp_path / "tiny.txt").write_text("ab ab")
    tiny = _lmspec("train-bpe", "tiny.txt", "--vocab-size", "300", "--out-dir", "tok", cwd=tmp_path)
    assert tiny.returncode == 0, tiny.stderr
    assert "warning: made 2 of the 43 merges asked for (--vocab-size 300)" in tiny.stderr, tiny.stderr
    # stderr is not a terminal: one line per phase, no bar frames
    assert "train-bpe: pre-tokenizing tiny.txt" in tiny.stderr and "\r" not in tiny.stderr, tiny.stderr


def test_mutants_on_an_installed_copy_says_the_catalog_ships_with_a_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lmspec.tools import mutants

    monkeypatch.setattr(mutants, "MUTANTS_DIR", tmp_path / "site-packages" / "lmspec" / "tests" / "mutants")
    rc = mutants.main([])
    err = capsys.readouterr().err
    assert rc == 2 and "ships only with a checkout" in err and len(err.strip().splitlines()) == 1, err
