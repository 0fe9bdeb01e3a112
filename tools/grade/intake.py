"""What the table, results.json and the HTML report say about intake: which
files and cells were graded, what was left out and why, which modules were
bound to placeholders (conformance/judge/worker/intake.py, placeholders.py).

``summary(record)`` turns the worker's record (``implementation.intake`` in
results.json, where every left-out statement is listed in full) into a few
lines; every string from the submission is cleaned (conformance/plain.py).
"""

from typing import Any

from lmspec.conformance.plain import plain

FAILED = "failed when run:"


def summary(record: dict[str, Any] | None) -> list[str]:
    """The lines that say what was graded and what was left out (none for a
    file imported as is with every module installed)."""
    if not isinstance(record, dict):
        return []
    lines = []
    files = [plain(str(f)) for f in record.get("files") or []]
    as_is = record.get("as_is_error")
    if isinstance(as_is, dict):
        where = f"{plain(str(as_is.get('file') or '').rpartition('/')[2])}:{as_is.get('line')}"
        lines.append(
            f"{', '.join(files)} did not import as is ({where}: {plain(str(as_is.get('type')))}: "
            f"{plain(str(as_is.get('message')))[:200]}): graded on its definitions (imports, functions, classes, "
            "plain assignments)"
        )
    elif files:
        cells = record.get("cells") if isinstance(record.get("cells"), dict) else {}
        named = ", ".join(
            f"{f} (code cell{'s' * (len(cells[f]) > 1)} {_ranges(cells[f])})" if cells.get(f) else f for f in files
        )
        order = "in chapter order, " if len(files) > 1 else ""
        later = "; a later definition of a name overrides an earlier one" if len(files) > 1 else ""
        lines.append(f"graded: {named}: {order}their definitions{later}")
    left_out = [x for x in record.get("left_out") or [] if isinstance(x, dict)]
    failed = [x for x in left_out if str(x.get("why", "")).startswith(FAILED)]
    lines += _left_out([x for x in left_out if x not in failed])
    for x in failed:
        why = plain(str(x.get("why"))).removeprefix(FAILED).strip()
        lines.append(f"{plain(str(x.get('where')))}: left out, it failed when run: {why}")
    magics = record.get("magics")
    for file, cells in magics.items() if isinstance(magics, dict) else ():
        lines.append(
            f"{plain(str(file))}: magic and shell lines dropped (code cell{'s' * (len(cells) > 1)} {_numbers(cells)})"
        )
    lines += [plain(str(note)) for note in record.get("notes") or []]
    placeholders = record.get("placeholders")
    if isinstance(placeholders, dict) and placeholders:
        named = ", ".join(f"{plain(str(m))} (imported at {plain(str(w))})" for m, w in placeholders.items())
        lines.append(
            f"not installed where lmspec ran, bound to placeholders: {named}; the names that use them fail when "
            "used (their items say so), the others were graded"
        )
    return lines


def _numbers(values: list[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _left_out(pieces: list[dict[str, Any]]) -> list[str]:
    """One line a file: how many statements were left out, where, and what they were."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for x in pieces:
        by_file.setdefault(plain(str(x.get("file") or "")), []).append(x)
    lines = []
    for file, group in by_file.items():
        cells = list(dict.fromkeys(x.get("cell") for x in group if x.get("cell") is not None))
        lines_ = [x.get("line") for x in group]
        where = (
            f"code cell{'s' * (len(cells) > 1)} {_numbers(cells)}"
            if cells
            else f"line{'s' * (len(lines_) > 1)} {_numbers(lines_)}"
        )
        kinds: dict[str, int] = {}
        for x in group:
            kind = plain(str(x.get("why")))
            kinds[kind] = kinds.get(kind, 0) + 1
        what = ", ".join(f"{kind} ×{n}" if n > 1 else kind for kind, n in kinds.items())
        lines.append(
            f"{file}: {len(group)} top-level statement{'s' * (len(group) > 1)} left out, not definitions "
            f"({where}): {what}"
        )
    return lines


def _ranges(numbers: list[Any]) -> str:
    """``1-5, 7, 9-10`` for [1, 2, 3, 4, 5, 7, 9, 10]."""
    values = sorted({int(n) for n in numbers if isinstance(n, int)})
    parts: list[str] = []
    for n in values:
        if parts and int(parts[-1].rpartition("-")[2]) == n - 1:
            parts[-1] = f"{parts[-1].partition('-')[0]}-{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts)
