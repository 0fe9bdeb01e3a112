"""Phase 1 of BPE training (SPEC §1.1, §1.2): the pre-token counts of a UTF-8
file. Large files are cut into chunks at safe boundaries (``find_chunk_boundaries``)
and counted in worker processes; the counts of the chunks add up to the
counts of the whole file.
"""

import contextlib
import io
import itertools
import math
import multiprocessing
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer.pretokenize import _check_special_tokens, count_pretokens

__all__ = ["PARALLEL_MIN_BYTES", "count_file_pretokens", "find_chunk_boundaries"]

# Below this size one process counts faster than starting workers does.
PARALLEL_MIN_BYTES: int = 4 << 20
_MAX_CHUNK_BYTES: int = 64 << 20
_SCAN_BLOCK: int = 1 << 20
# A cut after "\n" between two printable ASCII characters splits no pre-token:
# neither neighbour is whitespace, so the "\n" is a pre-token of its own.
_NEWLINE_CUT: bytes = rb"(?<=[!-~]\n)(?=[!-~])"


def _decode_or_raise(data: bytes, path: Path, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = offset + err.start
        raise ValueError(
            f"{str(path)!r} is not valid UTF-8: first bad byte 0x{data[err.start]:02x} "
            f"at byte offset {bad} ({err.reason})"
        ) from None


def _count_chunk(job: tuple[str, int, int, tuple[str, ...]]) -> tuple[dict[str, int], int, str]:
    """Worker: pre-token counts of bytes [start, end) of a file, or (empty, bad offset, reason)."""
    path, start, end, specials = job
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return {}, start + err.start, err.reason
    return dict(count_pretokens(text, specials)), -1, ""


def _specials_can_overlap(encoded: list[bytes]) -> bool:
    """Whether occurrences of specials can overlap (as "aa" in "aaa", "<e>" in "<e><e>")."""
    return any(t in s[1:] or any(t.startswith(s[i:]) for i in range(1, len(s))) for s in encoded for t in encoded)


def _cut_pattern(specials: tuple[str, ...]) -> re.Pattern[bytes] | None:
    """Byte pattern whose match starts are safe chunk boundaries (None: no safe cut).

    A special-token start is safe when occurrences of specials cannot overlap:
    then every occurrence is a match of the split. A newline cut is safe when
    no special contains a newline.
    """
    encoded = [s.encode("utf-8") for s in specials]
    alternatives = []
    if encoded and not _specials_can_overlap(encoded):
        alternatives += [re.escape(s) for s in sorted(encoded, key=len, reverse=True)]
    if not any(b"\n" in s for s in encoded):
        alternatives.append(_NEWLINE_CUT)
    return re.compile(b"|".join(alternatives)) if alternatives else None


def find_chunk_boundaries(path: PathLike, num_chunks: int, special_tokens: Sequence[str]) -> list[int]:
    """Byte offsets ``0 = b0 < b1 < ... = file size`` cutting the file into at most ``num_chunks``.

    Each inner offset is the first safe cut at or after an even split point:
    the start of a special token, or (when no special contains a newline) just
    after a ``\\n`` between two printable ASCII characters. Counting the
    chunks separately gives the counts of the whole file.
    """
    size = os.path.getsize(path)
    pattern = _cut_pattern(_check_special_tokens(special_tokens))
    if num_chunks <= 1 or size == 0 or pattern is None:
        return [0, size]
    overlap = max((len(s.encode("utf-8")) for s in special_tokens), default=0) + 2
    boundaries = [0]
    with open(path, "rb") as f:
        for i in range(1, num_chunks):
            guess = max(size * i // num_chunks, boundaries[-1])
            boundaries.append(_next_cut(f, guess, size, pattern, overlap))
            if boundaries[-1] == size:
                break  # that scan reached the end: no cut lies further on
    boundaries.append(size)
    return sorted(set(boundaries))


def _next_cut(f: io.BufferedIOBase, start: int, size: int, pattern: re.Pattern[bytes], overlap: int) -> int:
    """First safe cut at or after ``start`` (``size`` when there is none)."""
    position = start
    while position < size:
        base = max(position - 2, 0)  # two bytes back: the newline cut looks behind
        f.seek(base)
        block = f.read(position - base + _SCAN_BLOCK + overlap)
        match = pattern.search(block, position - base)
        if match is not None:
            return base + match.start()
        position += _SCAN_BLOCK
    return size


def count_file_pretokens(
    input_path: PathLike,
    special_tokens: Sequence[str],
    *,
    num_workers: int | None = None,
    progress: bool = False,
    min_parallel_bytes: int = PARALLEL_MIN_BYTES,
) -> Counter[str]:
    """Pre-token counts of a UTF-8 file, special tokens excluded (SPEC §1.1).

    Files of ``min_parallel_bytes`` or more are cut by ``find_chunk_boundaries``
    and counted by up to ``num_workers`` processes (default: CPU count).
    """
    path = Path(input_path)
    specials = _check_special_tokens(special_tokens)
    size = path.stat().st_size
    workers = num_workers if num_workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise ValueError(f"num_workers ({num_workers}) must be at least 1")
    if size < min_parallel_bytes:
        text = _decode_or_raise(path.read_bytes(), path, 0)
        return count_pretokens(text, specials)

    # Several chunks per worker keep workers busy and bound the memory per chunk.
    num_chunks = max(workers * 4, math.ceil(size / _MAX_CHUNK_BYTES))
    bounds = find_chunk_boundaries(path, num_chunks, specials)
    jobs = [(str(path), a, b, specials) for a, b in itertools.pairwise(bounds)]
    totals: Counter[str] = Counter()
    with contextlib.ExitStack() as stack:
        if workers == 1 or len(jobs) == 1:
            results = map(_count_chunk, jobs)
        else:
            pool = stack.enter_context(multiprocessing.get_context().Pool(min(workers, len(jobs))))
            results = pool.imap(_count_chunk, jobs)
        # Created after the workers exist: tqdm's monitor thread must not be forked.
        bar = stack.enter_context(
            tqdm(total=size, unit="B", unit_scale=True, desc="pre-tokenize", disable=not progress)
        )
        # In order: the first chunk reporting bad UTF-8 holds the file's first bad byte.
        for (counts, bad, reason), (_, a, b, _) in zip(results, jobs):
            if bad >= 0:
                with open(path, "rb") as f:
                    f.seek(bad)
                    byte = f.read(1)[0]
                raise ValueError(
                    f"{str(path)!r} is not valid UTF-8: first bad byte 0x{byte:02x} at byte offset {bad} ({reason})"
                )
            totals.update(counts)
            bar.update(b - a)
    return totals
