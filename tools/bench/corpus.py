"""Deterministic benchmark corpora from text that every Python installation ships.

``stdlib_corpus(n_bytes, cache_dir)``: the documentation topics of
``pydoc_data.topics`` (sorted by topic name), then every ``.py`` file of the
standard library (``sysconfig`` "stdlib" path, ``site-packages`` excluded) in
sorted relative-path order, skipping the few files that are not valid UTF-8;
documents are joined with ``<|endoftext|>``. The sequence is repeated and
truncated to exactly ``n_bytes`` bytes (a multi-byte character cut at the end
is replaced by spaces, so the file stays valid UTF-8). Same Python version,
same bytes: the sha256 is recorded next to every result.

``encode_text(n_bytes, cache_dir)``: the short English/German/TinyStories
fixtures (when ../shared/fixtures is present) followed by the start of the
stdlib corpus, to ``n_bytes`` bytes: prose first, then code.
"""

import platform
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from lmspec.tools.bench.common import EOT, fixtures_dir

__all__ = ["encode_text", "stdlib_corpus", "stdlib_documents"]


def stdlib_documents() -> Iterator[str]:
    """The documents of the corpus, in order (see the module docstring)."""
    from pydoc_data.topics import topics

    for key in sorted(topics):
        yield topics[key]
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        (p for p in root.rglob("*.py") if "site-packages" not in p.relative_to(root).parts),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    for path in files:
        try:
            yield path.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue


def _fit(data: bytes, n_bytes: int) -> bytes:
    """Repeat/truncate ``data`` to exactly ``n_bytes``, keeping it valid UTF-8."""
    if not data:
        raise ValueError("no corpus text")
    reps = -(-n_bytes // len(data))
    out = (data * reps)[:n_bytes]
    # a cut inside a multi-byte character: replace its leading bytes with spaces
    text = out.decode("utf-8", errors="ignore")
    body = text.encode("utf-8")
    return body + b" " * (n_bytes - len(body))


def _corpus_bytes(n_bytes: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    for doc in stdlib_documents():
        parts.append(doc.encode("utf-8") + EOT.encode())
        size += len(parts[-1])
        if size >= n_bytes:
            break  # enough: the rest would be cut off anyway
    return _fit(b"".join(parts), n_bytes)


def stdlib_corpus(n_bytes: int, cache_dir: Path) -> Path:
    """Path of the cached corpus of ``n_bytes`` bytes (built on first use)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    tag = platform.python_version()
    path = cache_dir / f"stdlib-py{tag}-{n_bytes}.txt"
    if not path.is_file() or path.stat().st_size != n_bytes:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(_corpus_bytes(n_bytes))
        tmp.replace(path)
    return path


def encode_text(n_bytes: int, cache_dir: Path) -> Path:
    """Path of the cached encoding-benchmark text (prose fixtures, then the stdlib corpus)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    fixtures = fixtures_dir()
    prose = b""
    if fixtures is not None:
        names = ["tinystories_sample.txt", "address.txt", "german.txt", "corpus.en"]
        prose = EOT.encode().join((fixtures / n).read_bytes() for n in names) + EOT.encode()
    tag = f"{platform.python_version()}-{'fx' if prose else 'nofx'}"
    path = cache_dir / f"encode-py{tag}-{n_bytes}.txt"
    if not path.is_file() or path.stat().st_size != n_bytes:
        data = prose + _corpus_bytes(max(n_bytes - len(prose), 1))
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(_fit(data, n_bytes))
        tmp.replace(path)
    return path
