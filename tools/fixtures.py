"""``lmspec fixtures``: the official oracle files in one verified command.

    lmspec fixtures fetch                 download them from the official repository (pinned commit;
                                          its main branch for a file the commit is not served with)
    lmspec fixtures fetch --from PATH     take them from a CS336 checkout, a folder of the files,
                                          or a .zip / .tar.gz archive of either
    lmspec fixtures where                 where a grading finds each file now

Every file is checked against the sha256 lmspec knows (conformance/fixtures.py)
before it is stored in the cache (``$LMSPEC_FIXTURES_CACHE``, else
``$XDG_CACHE_HOME/lmspec/fixtures``, else ``~/.cache/lmspec/fixtures``); a
file that differs is refused by name and never stored, so the cache only
ever holds the official bytes. Every later grading
looks there after --fixtures, LMSPEC_FIXTURES and the graded repository.

An archive is read, never extracted: only regular members at the paths the
files have in a checkout or a fixtures folder are read, each at most
MAX_FIXTURE_BYTES, and they are written under lmspec's own names, so no
member's name ever becomes a path on this machine.
"""

import argparse
import os
import sys
import tarfile
import tempfile
import typing
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from lmspec.conformance.fixtures import FIXTURES, MAX_FIXTURE_BYTES, FixtureSet, cache_folder, sha256_file
from lmspec.conformance.fixtures import _untrusted_file_problem as untrusted_file_problem

#: The official assignment repository, and the commit whose files lmspec's hashes were recorded from.
OFFICIAL_REPOSITORY = "stanford-cs336/assignment1-basics"
OFFICIAL_COMMIT = "25a8a49"
#: Asked when the pinned commit is not served (a file missing there): every file is verified by its
#: sha256 whichever ref served it, so a later commit can only bring the same bytes or be refused.
FALLBACK_REF = "main"
RAW_URL = "https://raw.githubusercontent.com/{repository}/{commit}/{path}"
#: Seconds a download may wait for the server.
DOWNLOAD_TIMEOUT = 60
#: An archive with more members than this is not read to the end (a checkout has a few hundred).
MAX_ARCHIVE_MEMBERS = 100_000
#: Nor one whose members add up to more bytes than this (a checkout's archive is tens of MB).
MAX_ARCHIVE_BYTES = 4 << 30
ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar")


class FetchError(Exception):
    """The source cannot be read at all (one line, exit status 1)."""


def _wanted(name: str) -> tuple[str, ...]:
    """Where ``name`` lies in a checkout (its repository path) or a fixtures folder (its names)."""
    _, repo_path, aliases = FIXTURES[name]
    return (repo_path, name, *aliases)


def _matches(member: str, name: str) -> bool:
    """A member path is ``name``'s when it is one of its places, directly or
    under one top folder (the one a GitHub archive or a zipped folder adds)."""
    parts = PurePosixPath(member).parts
    if not parts or parts[0] in ("/", "..") or ".." in parts:
        return False
    for wanted in _wanted(name):
        want = PurePosixPath(wanted).parts
        if parts == want or (len(parts) == len(want) + 1 and parts[1:] == want):
            return True
    return False


def _from_folder(folder: Path) -> Iterator[tuple[str, str, bytes | None]]:
    """(name, where, bytes) of every candidate copy in a folder or one folder below it."""
    roots = [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())]
    for name in FIXTURES:
        for root in roots:
            for wanted in _wanted(name):
                path = root / wanted
                why = untrusted_file_problem(path, folder)
                if why == "absent":
                    continue
                if why is not None:
                    yield name, f"{path}: {why}", None
                    continue
                yield name, str(path), Path(os.path.realpath(path)).read_bytes()


def _from_zip(archive: Path) -> Iterator[tuple[str, str, bytes | None]]:
    with zipfile.ZipFile(archive) as z:
        infos = z.infolist()
        if len(infos) > MAX_ARCHIVE_MEMBERS:
            raise FetchError(f"{archive}: more than {MAX_ARCHIVE_MEMBERS} members, not a CS336 checkout")
        for info in infos:
            # a symbolic link in a zip is a member whose Unix mode says so: never read as a file
            is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
            if info.is_dir() or is_link:
                continue
            for name in FIXTURES:
                if _matches(info.filename, name):
                    with z.open(info) as f:
                        yield name, f"{archive}:{info.filename}", _bounded(f.read(MAX_FIXTURE_BYTES + 1), archive)


def _from_tar(archive: Path) -> Iterator[tuple[str, str, bytes | None]]:
    with tarfile.open(archive, "r:*") as t:
        total = 0
        for count, member in enumerate(t):
            total += max(member.size, 0)
            if count >= MAX_ARCHIVE_MEMBERS or total > MAX_ARCHIVE_BYTES:
                raise FetchError(
                    f"{archive}: more than {MAX_ARCHIVE_MEMBERS} members or {MAX_ARCHIVE_BYTES >> 30} GiB, "
                    "not a CS336 checkout"
                )
            if not member.isreg():  # links, devices, folders: never read
                continue
            for name in FIXTURES:
                if _matches(member.name, name):
                    f = t.extractfile(member)
                    if f is not None:
                        yield name, f"{archive}:{member.name}", _bounded(f.read(MAX_FIXTURE_BYTES + 1), archive)


def _bounded(data: bytes, archive: Path) -> bytes:
    if len(data) > MAX_FIXTURE_BYTES:
        raise FetchError(f"{archive}: a member larger than {MAX_FIXTURE_BYTES} bytes where an oracle file should be")
    return data


def _from_network(commit: str, cache: Path) -> Iterator[tuple[str, str, bytes | None]]:
    for name in FIXTURES:
        if _cached_ok(cache, name):  # a verified copy is not downloaded again
            continue
        url = RAW_URL.format(repository=OFFICIAL_REPOSITORY, commit=commit, path=FIXTURES[name][1])
        try:
            try:
                data = _download(url)
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or commit == FALLBACK_REF:
                    raise
                url = RAW_URL.format(repository=OFFICIAL_REPOSITORY, commit=FALLBACK_REF, path=FIXTURES[name][1])
                data = _download(url)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise FetchError(
                f"could not download {url} ({reason}); offline, take the files from a copy: "
                "lmspec fixtures fetch --from PATH (a CS336 checkout, its tests/fixtures folder, or an archive)"
            ) from exc
        if len(data) > MAX_FIXTURE_BYTES:
            raise FetchError(f"{url}: larger than {MAX_FIXTURE_BYTES} bytes, not an oracle file")
        yield name, url, data


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:
        return response.read(MAX_FIXTURE_BYTES + 1)


def _candidates(source: str | None, commit: str, cache: Path) -> Iterator[tuple[str, str, bytes | None]]:
    if source is None:
        return _from_network(commit, cache)
    path = Path(source).expanduser()
    if path.is_dir():
        return _from_folder(path.resolve())
    if not path.is_file():
        raise FetchError(f"--from {source}: no such file or folder; expected a CS336 checkout, a folder or an archive")
    lower = path.name.lower()
    if lower.endswith(".zip") and zipfile.is_zipfile(path):
        return _from_zip(path)
    if lower.endswith(ARCHIVES) and tarfile.is_tarfile(path):
        return _from_tar(path)
    raise FetchError(
        f"--from {source}: not a folder or a readable {', '.join(ARCHIVES)} archive; "
        "expected a CS336 checkout, a folder of the oracle files, or an archive of either"
    )


def _store(cache: Path, name: str, data: bytes) -> None:
    """Write ``name`` whole or not at all (a reader never sees half a file)."""
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, cache / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch(source: str | None, cache: Path, commit: str = OFFICIAL_COMMIT, out=print) -> int:
    """Store every official file found in ``source`` (None: the official
    repository) in ``cache``; 0 when the cache then holds all of them."""
    import hashlib

    stored: dict[str, str] = {}
    refused: dict[str, list[str]] = {}
    try:
        for name, where, data in _candidates(source, commit, cache):
            if name in stored:
                continue
            if data is None:
                refused.setdefault(name, []).append(where)
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest in FIXTURES[name][0]:
                _store(cache, name, data)
                stored[name] = digest
            else:
                refused.setdefault(name, []).append(f"{where}: sha256 {digest[:12]}...")
    except (FetchError, zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        out(f"lmspec fixtures: {_one_line(exc)}", file=sys.stderr)
        return 1
    for name in FIXTURES:
        if name in stored:
            out(f"  stored   {name}")
        elif name in refused:
            out(f"  REFUSED  {name}: not the official file ({'; '.join(refused[name])}); not stored")
        else:
            out(f"  cached   {name}" if _cached_ok(cache, name) else f"  absent   {name}")
    present = [n for n in FIXTURES if _cached_ok(cache, n)]
    missing = [n for n in FIXTURES if n not in present]
    out(f"{len(present)} of {len(FIXTURES)} oracle files in {cache}")
    if refused and any(n not in stored for n in refused):
        names = ", ".join(n for n in refused if n not in stored)
        out(f"lmspec fixtures: refused {names}: its bytes differ from the official file's", file=sys.stderr)
    if missing:
        out(f"lmspec fixtures: still missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    out("every grading finds them there (after --fixtures, LMSPEC_FIXTURES and the graded repository)")
    return 0


def _cached_ok(cache: Path, name: str) -> bool:
    path = cache / name
    return path.is_file() and sha256_file(path) in FIXTURES[name][0]


def _one_line(exc: BaseException) -> str:
    from lmspec.conformance.plain import plain

    text = " ".join(plain(str(exc) or type(exc).__name__).split())
    return text if isinstance(exc, FetchError) else f"{type(exc).__name__}: {text}"


def where(out=print) -> int:
    """Where a grading without --fixtures finds each file now (0 when all are found)."""
    files = FixtureSet.default(None, None)
    found = 0
    for name in FIXTURES:
        if files.has(name):
            used = files.used[name]
            out(f"  {name}: {used['path']} (from {used['source']})")
            found += 1
        else:
            out(f"  {name}: not found")
    out(f"{found} of {len(FIXTURES)} oracle files found; the cache is {cache_folder()}")
    return 0 if found == len(FIXTURES) else 1


class _Parser(argparse.ArgumentParser):
    """A mistake in the arguments is one line naming where the help is (exit status 2)."""

    def error(self, message: str) -> "typing.NoReturn":
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)


def build_parser(prog: str = "lmspec fixtures") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="{fetch,where}")
    f = sub.add_parser("fetch", help="store the official oracle files, verified, in the cache")
    f.add_argument(
        "--from",
        dest="source",
        metavar="PATH",
        help="a CS336 checkout, a folder of the files, or a .zip / .tar.gz archive (default: download them from "
        f"github.com/{OFFICIAL_REPOSITORY} at commit {OFFICIAL_COMMIT})",
    )
    sub.add_parser("where", help="where a grading finds each oracle file now")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "where":
        return where()
    return fetch(args.source, cache_folder())


__all__ = ["OFFICIAL_COMMIT", "OFFICIAL_REPOSITORY", "fetch", "main", "where"]
