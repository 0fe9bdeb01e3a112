"""``lmspec grade --spec ITEMS --watch`` (issue 30): the named items are
re-graded whenever a file of the submission changes, printing only what
changed, until Ctrl-C; and ``--spec`` takes the names a reader knows an item
by (an adapter function's, the book's, the annotated notes')."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmspec.conformance import profiles
from lmspec.conformance.judge.launch import die_with_parent
from lmspec.conformance.target import Target
from lmspec.tools.grade import watch as watching
from lmspec.tools.grade.results import Status
from lmspec.tools.grade.select import expand

REPO = Path(__file__).resolve().parent.parent


# --- what --spec selects ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("selector", "profile", "ids"),
    [
        ("2.rope", "cs336", "2.rope"),
        ("run_rope", "cs336", "2.rope"),
        ("MultiHeadAttention", "gpt2", "gpt2.mha"),
        ("generate_text_simple", "gpt2", "gpt2.generate_simple"),
        ("MultiHeadedAttention", "encdec", "encdec.mha"),
        ("PositionalEncoding", "encdec", "encdec.positions"),
    ],
)
def test_spec_takes_the_names_an_item_is_known_by(selector: str, profile: str, ids: str) -> None:
    assert expand(selector, [profiles.get(profile)]) == (ids, [])


def test_spec_name_of_another_profile_or_of_nothing_is_unknown() -> None:
    assert expand("MultiHeadAttention,2.rope", [profiles.get("cs336")]) == ("2.rope", ["MultiHeadAttention"])
    assert expand("Nothing", list(profiles.all_profiles())) == ("", ["Nothing"])


def test_spec_name_unknown_to_the_grader_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from lmspec.tools.grade import cli

    rc = cli.main(["--spec", "MultiHeadAttention"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "--spec MultiHeadAttention: matches no spec item of profile cs336" in err
    assert "or the name of an adapter function or of the book's or the notes' classes" in err


# --- what is printed after a re-grade -----------------------------------------------------------
def _state(**items: str) -> dict[str, tuple[Status, str, str]]:
    return {
        i.replace("_", "."): (Status(s), "1/1" if s == "pass" else "0/1", "" if s == "pass" else "why")
        for i, s in items.items()
    }


def test_after_a_regrade_only_what_changed_is_printed() -> None:
    before = _state(a_x="fail", a_y="pass", a_z="error", a_w="pass")
    after = _state(a_x="pass", a_y="pass", a_z="fail", a_w="fail")
    assert watching.changes(before, after) == [
        "  passed now    a.x (1/1)",
        "  still failing a.z (0/1): fail: why",
        "  new failure   a.w (0/1): fail: why",
    ]
    assert watching.changes(after | _state(a_z="pass", a_w="pass"), _state(a_z="pass")) == [
        "  nothing changed: every item passes, as before"
    ]
    assert watching.changes(None, _state(a_x="pass", a_z="fail")) == [
        "  passing       a.x (1/1)",
        "  fail          a.z (0/1): fail: why",
    ]


def test_an_edited_file_is_graded_again(tmp_path: Path) -> None:
    """The loop with a stand-in for the judge: the file is edited after the
    first grading; the second grading says which file changed and what
    passes now. A file under --out (inside the folder) triggers nothing."""
    folder = tmp_path / "repo"
    (folder / "cs336_basics").mkdir(parents=True)
    model = folder / "cs336_basics" / "model.py"
    model.write_text("broken = True\n")
    out = folder / "grade-out"
    statuses = iter(["fail", "pass"])
    lines: list[str] = []

    def run() -> SimpleNamespace:
        status = next(statuses)
        item = SimpleNamespace(id="2.rope", status=Status(status), points=2 if status == "pass" else 0, max_points=2)
        item.explanation = "" if status == "pass" else "rotation of the wrong pairs"
        out.mkdir(exist_ok=True)
        (out / "results.json").write_text(status)
        if status == "fail":
            threading.Timer(0.3, lambda: model.write_text("broken = False\n")).start()
        return SimpleNamespace(items=[item], verdict=status.upper(), passed=status == "pass")

    target = Target(
        given=str(folder), adapter=str(folder / "tests" / "adapters.py"), root=folder, name="r", profile="cs336"
    )
    rc = watching.watch(target, run, out=out, echo=lines.append, stop_after=2)  # type: ignore[arg-type]
    assert rc == 0, lines
    assert lines[0] == f"watching {folder} (Ctrl-C stops)"
    assert "first grading" in lines[1] and lines[2].startswith("  fail          2.rope (0/2): fail: rotation")
    assert "changed: cs336_basics/model.py:" in lines[3] and lines[4] == "  passed now    2.rope (2/2)", lines


def test_watch_of_a_module_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from lmspec.tools.grade import cli

    rc = cli.main(["json", "--watch"])  # an importable module, not a folder or a file
    err = capsys.readouterr().err
    assert rc == 2 and "--watch json: a module name has no files to watch" in err, err


# --- the real loop: a judge per change, Ctrl-C ----------------------------------------------------
SILU = "import torch\n\n\ndef run_silu(in_features):\n    return in_features * torch.sigmoid(in_features){}\n"


def _read_until(proc: subprocess.Popen, needle: str, seen: list[str], deadline: float) -> None:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if needle in line:
            return
    raise AssertionError(f"{needle!r} not seen:\n" + "\n".join(seen))


def test_watch_regrades_an_edited_adapter_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    adapters = tmp_path / "sub" / "adapters.py"
    adapters.parent.mkdir()
    adapters.write_text(SILU.format(" * 0.5"))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.pop("LMSPEC_ADAPTER", None)
    cmd = [sys.executable, "-m", "lmspec", "grade", str(adapters), "--spec", "run_silu", "--watch", "--out", str(out)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_as_in_a_terminal,
    )  # fmt: skip
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 600
        _read_until(proc, "first grading", seen, deadline)
        _read_until(proc, "2.silu", seen, deadline)
        assert "fail" in seen[-1] or "error" in seen[-1], seen
        started = time.monotonic()
        adapters.write_text(SILU.format(""))
        _read_until(proc, "changed: adapters.py", seen, deadline)
        _read_until(proc, "passed now    2.silu", seen, deadline)
        print(f"watched re-grade of one item: {time.monotonic() - started:.1f} s after the edit")
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rest = proc.stdout.read() if proc.stdout else ""
    assert rc == 0 and "watch stopped" in rest, (rc, seen, rest)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(tmp_path) in _cmdline(p)]
    assert not left, [_cmdline(p) for p in left]


def _as_in_a_terminal() -> None:
    """The grader as a terminal starts it: Ctrl-C's SIGINT not ignored (a test run started in the
    background by a non-interactive shell ignores it, and Python then never raises KeyboardInterrupt),
    and ended with this test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent(signal.SIGTERM)()


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
