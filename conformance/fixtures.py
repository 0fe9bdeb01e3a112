"""The oracle files (the official CS336 fixtures): where they come from, and
that they are the real ones.

A file is looked for, in order, in: the folder given with ``--fixtures``;
``$LMSPEC_FIXTURES``; the graded repository's own ``tests/fixtures`` (every
CS336 checkout has one; its AdamW result is ``tests/_snapshots/test_adamw.npz``);
the user's cache, where ``lmspec fixtures fetch`` stores them
(:func:`cache_folder`); ``../shared/fixtures`` beside
lmspec's checkout. Every file found is checked
against the sha256 table below (facts recorded from the official files of
the 2025 and 2026 handouts, which are byte-identical but for the AdamW
snapshot): a file that differs is refused, whoever brought it, so a
submission cannot grade itself against an oracle of its own. A file found
nowhere skips the tests that need it (unless LMSPEC_REQUIRE_FIXTURES is set,
as in CI), with a message saying what to point at; a file refused
everywhere fails them.

The graded repository is the submission's: a file there is taken only when
it is a regular file of at most MAX_FIXTURE_BYTES whose path, links
resolved, stays inside the repository (a link out of it, to another
checkout or to /dev/zero, is never followed, and is named among the refused).
"""

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from lmspec import ROOT

_ADAMW_2025 = "04bd00cf45f11ce45b48862006cc4309ee4e80f0b703f079c50c95246fe41e7a"
_ADAMW_2026 = "57dea23bf60c3381c757e9162e798da9a06060260bb4f79b8202a5484b28643e"

#: name -> (accepted sha256 digests, where a CS336 repository keeps it, other names in a fixtures folder)
FIXTURES: dict[str, tuple[frozenset[str], str, tuple[str, ...]]] = {
    "address.txt": (
        frozenset({"fc1f209025d3181137b8953cfeb559ab186782d48b93182eac2b6401816c1df4"}),
        "tests/fixtures/address.txt",
        (),
    ),
    "corpus.en": (
        frozenset({"617f603a49eeb8a20de9d922d11a5d70e1d362327b9e91718bea2cdcdf9816ff"}),
        "tests/fixtures/corpus.en",
        (),
    ),
    "german.txt": (
        frozenset({"372a3b9d896f2774e83721ea5d9aedc77a65ea31d7dfd77c4dbc6ee5eac50c28"}),
        "tests/fixtures/german.txt",
        (),
    ),
    "gpt2_merges.txt": (
        frozenset({"ac33235097fe06d4a8fff0feac994644809e6eb6ab70669e1e9fd40ae032428e"}),
        "tests/fixtures/gpt2_merges.txt",
        (),
    ),
    "gpt2_vocab.json": (
        frozenset({"196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"}),
        "tests/fixtures/gpt2_vocab.json",
        (),
    ),
    "special_token_double_newlines_non_whitespace.txt": (
        frozenset({"385b1a48679d11ec498dbda931e5d6bb035d0db87998730197bf1e11ab97d297"}),
        "tests/fixtures/special_token_double_newlines_non_whitespace.txt",
        (),
    ),
    "special_token_trailing_newlines.txt": (
        frozenset({"c7fac215bf4c84da8e1bbad6ff1fe9c07754f961479aa25c26b3460a2077da82"}),
        "tests/fixtures/special_token_trailing_newlines.txt",
        (),
    ),
    "tinystories_sample.txt": (
        frozenset({"defaedb58bf28079f3e29c6142cb7f3568d331a577e0911c5d7925c465c50c43"}),
        "tests/fixtures/tinystories_sample.txt",
        (),
    ),
    "train-bpe-reference-merges.txt": (
        frozenset({"f74582742501ca5edd5be2b66adb83d7ae2b8d6363fd276771792e70de1428ed"}),
        "tests/fixtures/train-bpe-reference-merges.txt",
        (),
    ),
    "train-bpe-reference-vocab.json": (
        frozenset({"e28bfb2a4fa95ec786faf462cb0d504bc15773360f4891bdf262be171ab86c18"}),
        "tests/fixtures/train-bpe-reference-vocab.json",
        (),
    ),
    # the official AdamW run's result: either handout's snapshot is accepted
    "official_adamw_expected.npz": (
        frozenset({_ADAMW_2025, _ADAMW_2026}),
        "tests/_snapshots/test_adamw.npz",
        ("official_adamw_expected_2026.npz",),
    ),
}


#: Largest oracle file read from a graded repository (the official ones are under 2 MB).
MAX_FIXTURE_BYTES = 64 << 20

#: Where the cache keeps the oracle files, under the user's cache folder.
CACHE_SUBDIR = Path("lmspec") / "fixtures"


def cache_folder() -> Path:
    """The user's cache of oracle files: ``$LMSPEC_FIXTURES_CACHE`` when set,
    else ``$XDG_CACHE_HOME/lmspec/fixtures`` (``~/.cache/lmspec/fixtures``
    when XDG_CACHE_HOME is unset or relative, as the XDG base-directory
    rules say)."""
    explicit = os.environ.get("LMSPEC_FIXTURES_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / CACHE_SUBDIR


class FixtureMissing(LookupError):
    """No source has the file (the tests that need it skip)."""


class FixtureRefused(LookupError):
    """Every copy found differs from the official file (the tests fail)."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Source:
    label: str  # "--fixtures", "LMSPEC_FIXTURES", "the graded repository", "the cache", "../shared/fixtures"
    folder: Path | None  # None: not given
    repository: bool = False  # a CS336 checkout (files at their paths in FIXTURES)

    def candidates(self, name: str) -> list[Path]:
        if self.folder is None:
            return []
        _, repo_path, aliases = FIXTURES[name]
        if self.repository:
            return [self.folder / repo_path]
        return [self.folder / n for n in (name, *aliases)]


def folder_problem(folder: str) -> str | None:
    """Why a folder given with ``--fixtures`` cannot serve (None when it holds
    at least one oracle file by its name; the contents are checked on use)."""
    path = Path(folder).expanduser()
    expected = "a folder holding the official CS336 fixture files (corpus.en, gpt2_vocab.json, ...)"
    if not path.exists():
        return f"--fixtures {folder}: no such folder; expected {expected}"
    if not path.is_dir():
        return f"--fixtures {folder}: not a folder; expected {expected}"
    source = Source("--fixtures", path.resolve())
    if not any(c.is_file() for name in FIXTURES for c in source.candidates(name)):
        return f"--fixtures {folder}: holds none of the {len(FIXTURES)} oracle files; expected {expected}"
    return None


def default_sources(explicit: str | None, repo_root: Path | None) -> list[Source]:
    env = os.environ.get("LMSPEC_FIXTURES")
    return [
        Source("--fixtures", Path(explicit).expanduser().resolve() if explicit else None),
        Source("LMSPEC_FIXTURES", Path(env).expanduser().resolve() if env else None),
        Source("the graded repository", repo_root, repository=True),
        Source("the cache", cache_folder()),
        Source("../shared/fixtures", ROOT.parent / "shared" / "fixtures"),
    ]


@dataclass
class FixtureSet:
    """Resolves oracle files on first use; ``fixtures / "corpus.en"`` is the
    verified path (or raises FixtureMissing / FixtureRefused)."""

    sources: list[Source]
    used: dict[str, dict[str, str]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    _cache: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def default(cls, explicit: str | None, repo_root: Path | None) -> "FixtureSet":
        """The sources in their order (module docstring)."""
        return cls(default_sources(explicit, repo_root))

    def __truediv__(self, name: str) -> Path:
        return self.path(name)

    def has(self, name: str) -> bool:
        """Whether a verified copy of ``name`` is found (without failing)."""
        try:
            self.path(name)
        except (FixtureMissing, FixtureRefused):
            return False
        return True

    def path(self, name: str) -> Path:
        if name in self._cache:
            return self._cache[name]
        if name not in FIXTURES:
            raise KeyError(f"{name} is not an oracle file lmspec knows (conformance/fixtures.py)")
        digests = FIXTURES[name][0]
        refused_here = []
        for source in self.sources:
            for candidate in source.candidates(name):
                if source.repository:
                    why = _untrusted_file_problem(candidate, source.folder)
                    if why == "absent":
                        continue
                    if why is not None:
                        refused_here.append(f"{candidate} (from {source.label}: {why})")
                        continue
                    candidate = Path(os.path.realpath(candidate))
                elif not candidate.is_file():
                    continue
                digest = sha256_file(candidate)
                if digest in digests:
                    self._cache[name] = candidate
                    self.used[name] = {"source": source.label, "path": str(candidate), "sha256": digest}
                    return candidate
                refused_here.append(
                    f"{candidate} (from {source.label}: sha256 {digest[:12]}..., not the official file)"
                )
        if refused_here:
            self.refused.extend(r for r in refused_here if r not in self.refused)
            raise FixtureRefused(
                f"oracle file {name} refused: " + "; ".join(refused_here) + ". Restore the official file (`lmspec "
                "fixtures fetch` stores it in the cache), or point --fixtures (or LMSPEC_FIXTURES) at a folder "
                "with the official CS336 tests/fixtures files"
            )
        if name not in self.missing:
            self.missing.append(name)
        raise FixtureMissing(self.explain_missing(name))

    def explain_missing(self, name: str) -> str:
        looked = []
        for source in self.sources:
            if source.folder is None:
                looked.append(f"{source.label} (not given)")
            else:
                looked.append(f"{source.label} ({', '.join(str(c) for c in source.candidates(name))})")
        return (
            f"oracle file {name} not found; looked in: "
            + "; ".join(looked)
            + ". Run `lmspec fixtures fetch` (it downloads the official files into the cache), or point "
            "--fixtures (or LMSPEC_FIXTURES) at the tests/fixtures folder of a CS336 assignment-1 checkout "
            "(github.com/stanford-cs336/assignment1-basics)"
        )

    def report(self) -> dict[str, object]:
        return {"used": self.used, "refused": self.refused, "missing": self.missing}


def _untrusted_file_problem(path: Path, folder: Path | None) -> str | None:
    """Why ``path`` of the submission's ``folder`` is not read ("absent" when
    there is nothing there); None for a regular file inside it."""
    if folder is None or not os.path.lexists(path):
        return "absent"
    real_folder = os.path.realpath(folder)
    real = os.path.realpath(path)
    if not Path(real).is_relative_to(real_folder):
        return f"a link out of the repository, to {real}: not followed"
    try:
        info = os.stat(real)
    except OSError:
        return "absent"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > MAX_FIXTURE_BYTES:
        return f"{info.st_size} bytes, larger than any official file"
    return None
