"""``lmspec fixtures fetch`` (issue 30): the official oracle files in one
command, verified, stored in the user's cache, found there by every later
grading. The sources here are local folders and archives built at run time
from the real files LMSPEC_FIXTURES points at (never the network)."""

import io
import os
import shutil
import tarfile
import urllib.error
import zipfile
from pathlib import Path

import pytest

from lmspec.conformance.fixtures import FIXTURES, FixtureSet, cache_folder, default_sources
from lmspec.tools import fixtures as fetching


@pytest.fixture
def official() -> Path:
    env = os.environ.get("LMSPEC_FIXTURES")
    if not env or not (Path(env) / "corpus.en").is_file():
        pytest.skip("the official oracle files are absent: set LMSPEC_FIXTURES to a folder holding them")
    return Path(env)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own; no other source of oracle files."""
    monkeypatch.setenv("LMSPEC_FIXTURES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LMSPEC_FIXTURES", raising=False)
    return tmp_path / "cache"


def _checkout(official: Path, root: Path) -> Path:
    """The files where a CS336 checkout keeps them (tests/fixtures, tests/_snapshots)."""
    for name, (_, repo_path, _aliases) in FIXTURES.items():
        (root / repo_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(official / name, root / repo_path)
    return root


def _fetch(source: Path | None, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = fetching.main(["fetch"] + (["--from", str(source)] if source is not None else []))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_fetch_from_a_folder_stores_all_and_a_later_grading_finds_them(
    official: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _fetch(official, capsys)
    assert rc == 0 and not err, (out, err)
    assert f"11 of 11 oracle files in {cache}" in out
    assert sorted(p.name for p in cache.iterdir()) == sorted(FIXTURES)
    files = FixtureSet.default(None, None)
    assert files.path("corpus.en") == cache / "corpus.en"
    assert files.used["corpus.en"]["source"] == "the cache"


def test_fetch_from_a_github_style_archive_of_a_checkout(
    official: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .tar.gz as GitHub serves it: the checkout under one top folder, the
    AdamW result at tests/_snapshots/test_adamw.npz."""
    checkout = _checkout(official, tmp_path / "assignment1-basics-25a8a49")
    archive = tmp_path / "assignment1-basics.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(checkout, arcname=checkout.name)
    rc, out, err = _fetch(archive, capsys)
    assert rc == 0 and not err, (out, err)
    assert sorted(p.name for p in cache.iterdir()) == sorted(FIXTURES)


def test_fetch_from_a_zip_of_the_fixtures_folder(
    official: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "fixtures.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in FIXTURES:
            z.write(official / name, f"fixtures/{name}")
    rc, out, err = _fetch(archive, capsys)
    assert rc == 0 and not err, (out, err)
    assert FixtureSet.default(None, None).has("gpt2_vocab.json")


def test_a_tampered_file_is_refused_by_name_and_never_stored(
    official: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(official, folder)
    with open(folder / "corpus.en", "ab") as f:
        f.write(b"one more line\n")
    rc, out, err = _fetch(folder, capsys)
    assert rc == 1, (out, err)
    assert "REFUSED  corpus.en: not the official file" in out, out
    assert "refused corpus.en" in err and "still missing: corpus.en" in err, err
    assert not (cache / "corpus.en").exists() and (cache / "address.txt").is_file()


def test_an_archive_member_never_becomes_a_path_and_links_are_not_read(
    official: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member named ../corpus.en or /tmp/x is not an oracle file's place;
    a link at tests/fixtures/corpus.en is not read; only lmspec's own names
    are written, in the cache."""
    archive = tmp_path / "hostile.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        data = (official / "corpus.en").read_bytes()
        for name in ("../corpus.en", "/tmp/lmspec-evil/corpus.en", "a/b/../../corpus.en"):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("repo/tests/fixtures/corpus.en")
        link.type, link.linkname = tarfile.SYMTYPE, str(official / "corpus.en")
        t.addfile(link)
        info = tarfile.TarInfo("repo/tests/fixtures/address.txt")
        data = (official / "address.txt").read_bytes()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    rc, out, err = _fetch(archive, capsys)
    assert rc == 1 and "still missing" in err and "corpus.en" in err, (out, err)
    assert sorted(p.name for p in cache.iterdir()) == ["address.txt"]
    assert not (tmp_path / "corpus.en").exists() and not Path("/tmp/lmspec-evil").exists()


def test_bad_sources_are_one_line(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for given, expected in [
        (tmp_path / "nowhere", "no such file or folder"),
        (tmp_path / "notes.txt", "not a folder or a readable"),
    ]:
        rc, _, err = _fetch(given, capsys)
        assert rc == 1 and err.count("\n") == 1 and expected in err and str(given) in err, err


def test_a_mistake_in_the_arguments_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, expected in [([], "the following arguments are required"), (["fecth"], "invalid choice: 'fecth'")]:
        with pytest.raises(SystemExit) as exc:
            fetching.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and expected in err, err
        assert err.startswith("lmspec fixtures: error: ") and "(see lmspec fixtures --help)" in err


def test_offline_download_says_how_to_fetch_from_a_copy(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(url: str, timeout: float) -> None:
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(fetching.urllib.request, "urlopen", offline)
    rc, _, err = _fetch(None, capsys)
    assert rc == 1 and err.count("\n") == 1, err
    assert "raw.githubusercontent.com/stanford-cs336/assignment1-basics/" in err
    assert "lmspec fixtures fetch --from PATH" in err and not cache.exists()


def test_the_cache_comes_after_the_users_folders_and_the_graded_repository(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LMSPEC_FIXTURES_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder() == tmp_path / "xdg" / "lmspec" / "fixtures"
    labels = [s.label for s in default_sources(None, tmp_path)]
    assert labels[:4] == ["--fixtures", "LMSPEC_FIXTURES", "the graded repository", "the cache"], labels


def test_a_missing_file_names_the_fetch_command(cache: Path) -> None:
    from lmspec.tools.grade.results import FIXTURES_HINT

    files = FixtureSet(default_sources(None, None)[:4])
    assert "Run `lmspec fixtures fetch`" in files.explain_missing("corpus.en")
    assert "lmspec fixtures fetch" in FIXTURES_HINT


def test_quick_start_grade_passes_from_the_cache_and_names_the_reference_by_its_path_here(
    official: Path, cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nox -s grade` as a newcomer runs it once the files are fetched (one
    item that needs them, to stay short): PASS, exit 0, the files from the
    cache; the header names the reference where it lies on this machine, not
    where the sandbox shows it (/opt/lmspec-base/...): the table's header
    line shows results.json's origin."""
    import json

    from grader_run import run_grader

    from lmspec import ROOT

    assert _fetch(official, capsys)[0] == 0
    env = {"LMSPEC_FIXTURES": None, "LMSPEC_REQUIRE_FIXTURES": None, "LMSPEC_FIXTURES_CACHE": str(cache)}
    rc, output, _ = run_grader(tmp_path / "out", "--spec", "1.3.decode", "--jobs", "1", env=env)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert rc == 0 and data["verdict"] == "PASS", output
    assert {u["source"] for u in data["implementation"]["fixtures"]["used"].values()} == {"the cache"}
    origin = data["implementation"]["origin"]
    assert origin == str(ROOT / "reference" / "adapter" / "__init__.py"), origin
    assert "/opt/lmspec" not in json.dumps(data["implementation"]), data["implementation"]


def test_download_stores_the_official_files_and_fetches_only_what_is_missing(
    official: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The download path with a stand-in for the network: the URL of each
    file at the pinned commit; a second fetch asks for nothing."""
    by_url = {
        fetching.RAW_URL.format(repository=fetching.OFFICIAL_REPOSITORY, commit=fetching.OFFICIAL_COMMIT, path=p): n
        for n, (_, p, _aliases) in FIXTURES.items()
    }
    asked: list[str] = []

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        asked.append(url)
        return io.BytesIO((official / by_url[url]).read_bytes())

    monkeypatch.setattr(fetching.urllib.request, "urlopen", urlopen)
    assert _fetch(None, capsys)[0] == 0
    assert sorted(asked) == sorted(by_url) and sorted(p.name for p in cache.iterdir()) == sorted(FIXTURES)
    asked.clear()
    rc, out, _ = _fetch(None, capsys)
    assert rc == 0 and asked == [] and "  cached   corpus.en" in out, out


def test_a_commit_the_server_lacks_falls_back_to_main_and_is_still_verified(
    official: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """404 at the pinned commit: the file is asked of main, and a changed file there is refused."""
    asked: list[str] = []

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        asked.append(url)
        if f"/{fetching.OFFICIAL_COMMIT}/" in url:
            raise urllib.error.HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]
        name = next(n for n, (_, p, _a) in FIXTURES.items() if url.endswith("/" + p))
        data = (official / name).read_bytes()
        return io.BytesIO(data + b"changed upstream" if name == "german.txt" else data)

    monkeypatch.setattr(fetching.urllib.request, "urlopen", urlopen)
    rc, out, err = _fetch(None, capsys)
    assert rc == 1 and "REFUSED  german.txt" in out and "still missing: german.txt" in err, (out, err)
    assert any("/main/tests/fixtures/corpus.en" in u for u in asked) and (cache / "corpus.en").is_file()


def test_a_batch_ships_the_cache_to_its_workers_only_when_it_holds_the_files(
    official: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lmspec.tools.grade.batch import _fixtures_folder

    cache.mkdir()
    assert _fixtures_folder(None) != cache  # an empty cache is not a fixtures folder
    assert _fetch(official, capsys)[0] == 0
    assert _fixtures_folder(None) == cache
