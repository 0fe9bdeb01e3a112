"""Every path of lmspec's own tree that its documentation or its code cites
exists: README.md, BENCHMARKS.md, docs/*.md, and the product's .py files
(a moved or deleted file leaves no reference behind).

Not checked: the layout of a graded repository (its adapter files as the
profiles name them, ``tests/fixtures/...``, ``tests/_snapshots/...``: the
student's files) and placeholders (``NAME``, ``X``, ``<area>``, ``*``)."""

import re
from pathlib import Path

import pytest

from lmspec.conformance.profiles import all_profiles

REPO = Path(__file__).resolve().parent.parent
TOPS = ("reference", "conformance", "tools", "tests", "docs", "snapshots", "lmspec", ".ci")
#: A path that starts with one of lmspec's folders, outside a longer word or path.
CITED = re.compile(rf"(?<![\w./-])((?:{'|'.join(re.escape(t) for t in TOPS)})/[\w./<>*-]*[\w/*>])")
SUBMISSION = re.compile(r"tests/(fixtures|_snapshots)\b")
ADAPTER_FILES = {name for profile in all_profiles() for name in profile.adapter_files}
PLACEHOLDER = re.compile(r"[<>*]|\bNAME\b|\bX\b")


def _documents() -> list[Path]:
    docs = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]
    code = sorted(p for top in ("reference", "conformance", "tools", "lmspec") for p in (REPO / top).rglob("*.py"))
    return [p for p in docs + code if p.is_file()]


def _exists(cited: str) -> bool:
    path = REPO / cited.rstrip("/.")
    return path.exists() or path.with_suffix(".py").exists()  # `tools/spec` for tools/spec.py


def test_every_cited_path_exists() -> None:
    missing = [
        f"{doc.relative_to(REPO)}:{number}: {cited}"
        for doc in _documents()
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        for cited in CITED.findall(line)
        if cited not in ADAPTER_FILES
        and not SUBMISSION.match(cited)
        and not PLACEHOLDER.search(cited)
        and not _exists(cited)
    ]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_a_missing_path_is_found() -> None:
    """The pattern sees a path in prose and in a docstring (the test can fail)."""
    assert CITED.findall("see docs/walkthrough.md, and (tools/runsuite.py)") == [
        "docs/walkthrough.md",
        "tools/runsuite.py",
    ]
    assert not _exists("docs/walkthrough.md") and _exists("tools/smoke") and _exists("docs/SPEC.md")


# --- every `lmspec ...` command shown in the documentation parses; deterministic output matches ---------
#: A command at the start of a line of a code block (after a prompt, or an installed copy's path).
SHOWN = re.compile(r"^\s*(?:\$\s+)?(?:\S*/bin/)?(lmspec\s.*)$")
INLINE = re.compile(r"`(lmspec\s[^`]+)`")
#: Commands whose output the documents show as it is, to the byte.
DETERMINISTIC = {"lmspec --help"}


def _markdown() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def shown_commands(text: str) -> list[tuple[int, str, list[str]]]:
    """(line, command, the output lines below it) of every ``lmspec ...``
    in a code block (continued lines joined, comments dropped), and every
    inline `lmspec ...` with arguments."""
    lines = text.splitlines()
    found: list[tuple[int, str, list[str]]] = []
    fenced = False
    number = 0
    while number < len(lines):
        line = lines[number]
        if line.lstrip().startswith("```"):
            fenced = not fenced
            number += 1
            continue
        block = fenced or line.startswith("    ")
        match = SHOWN.match(line) if block else None
        if match is None:
            # inline, a command with arguments (`lmspec train-bpe` alone names the command, it does not run it)
            found += [(number + 1, m, []) for m in INLINE.findall(line) if len(_argv(m)) > 1]
            number += 1
            continue
        start, command = number + 1, match.group(1)
        while command.rstrip().endswith("\\") and number + 1 < len(lines):
            number += 1
            command = command.rstrip()[:-1] + " " + lines[number].strip()
        output = []  # what a prompted command prints, down to the next prompt or the block's end
        prompted = line.lstrip().startswith("$")
        while (
            prompted and fenced and number + 1 < len(lines) and not lines[number + 1].lstrip().startswith(("```", "$ "))
        ):
            number += 1
            output.append(lines[number])
        found.append((start, " ".join(command.split(" #", 1)[0].split()), output))
        number += 1
    return found


#: Where the shell takes over from the command (a redirection, a pipe, the next command).
SHELL = {">", ">>", "<", "|", "&&", "||", ";", "&"}


def _argv(command: str) -> list[str]:
    """The command's arguments after ``lmspec``, as the shell passes them;
    ``...`` (arguments left out) is dropped."""
    import shlex

    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word in SHELL:
            break
        words.append(word)
    return [w for w in words[1:] if w != "..."]


class _Parsed(BaseException):
    """Raised once the real parser has accepted a command (nothing runs)."""


def parse_problem(command: str, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Why the real parser of ``command`` refuses it (None when it accepts it)."""
    import argparse
    import contextlib
    import io

    from lmspec import cli

    argv = _argv(command)
    if argv and argv[0] in ("-h", "--help", "--version"):
        return None
    if not argv or argv[0] not in cli.COMMANDS:
        return f"unknown command {argv[:1]}"
    depth = [0]

    def outermost(method):  # type: ignore[no-untyped-def]
        """``method`` that stops the command once the outermost parse has accepted it
        (parse_args checks for unknown arguments after parse_known_args returns)."""

        def parse(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
            depth[0] += 1
            try:
                result = method(self, args, namespace)
            finally:
                depth[0] -= 1
            if depth[0] == 0:
                raise _Parsed
            return result

        return parse

    for name in ("parse_args", "parse_known_args"):
        monkeypatch.setattr(argparse.ArgumentParser, name, outermost(getattr(argparse.ArgumentParser, name)))
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(argv)
    except _Parsed:
        return None
    except SystemExit as exc:  # --help exits 0
        return f"exit {exc.code}: {errors.getvalue().strip()}" if exc.code else None
    finally:
        monkeypatch.undo()
    # a parser that reports its own mistakes (lmspec grade: one line, exit 2) returns instead of exiting
    return f"exit {rc}: {errors.getvalue().strip()}" if rc else None


def test_every_shown_lmspec_command_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = [
        f"{doc.relative_to(REPO)}:{line}: {command}: {problem}"
        for doc in _markdown()
        for line, command, _ in shown_commands(doc.read_text(encoding="utf-8"))
        if (problem := parse_problem(command, monkeypatch))
    ]
    assert not bad, "commands the documentation shows that lmspec refuses:\n" + "\n".join(bad)


def test_shown_deterministic_output_matches(capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from lmspec import cli

    checked = 0
    for doc in _markdown():
        for line, command, output in shown_commands(doc.read_text(encoding="utf-8")):
            if command in DETERMINISTIC and output:
                cli.main(shlex.split(command)[1:])
                assert capsys.readouterr().out.rstrip("\n").splitlines() == output, f"{doc.name}:{line}: {command}"
                checked += 1
    assert checked, "the README shows `lmspec --help` with its output"


def test_a_wrong_command_or_output_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extraction sees commands in blocks, after prompts and inline; a bad option is refused."""
    text = (
        "```console\n$ lmspec grade --sepc 2.rope\nout\n```\n```bash\nlmspec spec 2\nlmspec spec 3\n```\n"
        "    lmspec spec \\\n      2.rope  # one item\nsee `lmspec fixtures fetch --from X`\n"
    )
    commands = shown_commands(text)
    assert [(c, o) for _, c, o in commands] == [
        ("lmspec grade --sepc 2.rope", ["out"]),
        ("lmspec spec 2", []),
        ("lmspec spec 3", []),
        ("lmspec spec 2.rope", []),
        ("lmspec fixtures fetch --from X", []),
    ]
    assert "--sepc" in (parse_problem("lmspec grade --sepc 2.rope", monkeypatch) or "")
    assert parse_problem("lmspec fixtures fetch --from X > log", monkeypatch) is None
    assert "invalid choice" in (parse_problem("lmspec fixtures fecth", monkeypatch) or "")
