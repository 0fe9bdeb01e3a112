"""Every path of lmspec's own tree that its documentation or its code cites
exists: README.md, BENCHMARKS.md, docs/*.md, and the product's .py files
(a moved or deleted file leaves no reference behind).

Not checked: the layout of a graded repository (its adapter files as the
profiles name them, ``tests/fixtures/...``, ``tests/_snapshots/...``: the
student's files) and placeholders (``NAME``, ``X``, ``<area>``, ``*``)."""

import re
from pathlib import Path

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
