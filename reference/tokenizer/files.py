"""Save and load a vocabulary and merge list in GPT-2's file format.

Two UTF-8 files, the same format as GPT-2's own ``vocab.json`` / ``merges.txt``
(so ``load_vocab_merges`` also reads the released GPT-2 files):

``vocab.json``
    A JSON object mapping each token, written in GPT-2's printable form
    (``reference.tokenizer.gpt2``: one character per byte, ``b" the"`` is
    ``"Ġthe"``), to its integer id. ``save_vocab_merges`` writes one entry per
    line in id order, so errors can name a line. Special tokens are stored like
    any other token (``"<|endoftext|>"`` renders as itself).
``merges.txt``
    One merge per line, in merge (rank) order: the two tokens in printable form
    separated by one space (``"Ġt he"``). Printable tokens never contain
    whitespace, so the split is unambiguous. A first line starting with
    ``#version`` (as in the original GPT-2 release) and blank lines are
    ignored on load; ``save_vocab_merges`` writes no header.

Loading checks every line and raises ValueError naming the file and the line.
"""

import json
from pathlib import Path

from lmspec.reference._types import PathLike
from lmspec.reference.tokenizer.gpt2 import non_printable_message, printable_translation_tables

__all__ = ["load_merges", "load_vocab", "load_vocab_merges", "save_vocab_merges"]


def save_vocab_merges(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    vocab_path: PathLike,
    merges_path: PathLike,
) -> None:
    """Write ``vocab`` and ``merges`` in the format described in the module docstring."""
    # Inline str.translate: a type-checked call per token would dominate the time.
    table = printable_translation_tables()[0]
    lines = [
        f"  {json.dumps(token.decode('latin-1').translate(table), ensure_ascii=False)}: {token_id}"
        for token_id, token in sorted(vocab.items())
    ]
    Path(vocab_path).write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    Path(merges_path).write_text(
        "".join(f"{a.decode('latin-1').translate(table)} {b.decode('latin-1').translate(table)}\n" for a, b in merges),
        encoding="utf-8",
    )


def _line_of(text: str, key: str) -> int:
    """1-based line of a JSON object key in ``text`` (0 when it cannot be found)."""
    for rendered in (json.dumps(key, ensure_ascii=False), json.dumps(key)):
        position = text.find(rendered + ":")
        if position < 0:
            position = text.find(rendered)
        if position >= 0:
            return text.count("\n", 0, position) + 1
    return 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{str(path)!r}: not UTF-8 (byte offset {err.start}: {err.reason})") from None


def load_vocab(vocab_path: PathLike) -> dict[int, bytes]:
    """Read a ``vocab.json`` (printable token -> id) into ``{id: bytes}``.

    Raises:
        ValueError: not a JSON object of string -> non-negative int, an unknown
            printable character, or an id used twice; names file and line.
    """
    path = Path(vocab_path)
    text = _read_text(path)
    try:
        pairs = json.loads(text, object_pairs_hook=lambda items: items)
    except json.JSONDecodeError as err:
        raise ValueError(f"{str(path)!r} line {err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(pairs, list):
        raise ValueError(f"{str(path)!r} line 1: expected a JSON object mapping tokens to ids")
    vocab: dict[int, bytes] = {}
    to_latin1 = printable_translation_tables()[1]
    for key, token_id in pairs:
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise ValueError(
                f"{str(path)!r} line {_line_of(text, key)}: id of token {key!r} must be a "
                f"non-negative integer, got {token_id!r}"
            )
        if token_id in vocab:
            raise ValueError(f"{str(path)!r} line {_line_of(text, key)}: id {token_id} is used twice (token {key!r})")
        try:
            vocab[token_id] = key.translate(to_latin1).encode("latin-1")
        except UnicodeEncodeError:
            message = non_printable_message(key)
            raise ValueError(f"{str(path)!r} line {_line_of(text, key)}: {message}") from None
    return vocab


def load_merges(merges_path: PathLike) -> list[tuple[bytes, bytes]]:
    """Read a ``merges.txt`` (one ``"a b"`` per line, printable form) in rank order.

    Raises:
        ValueError: a line that is not two printable tokens separated by one
            space; names file and line.
    """
    path = Path(merges_path)
    merges: list[tuple[bytes, bytes]] = []
    to_latin1 = printable_translation_tables()[1]
    # split("\n"), not splitlines(): the latter also cuts at U+0085, U+2028...
    for number, raw in enumerate(_read_text(path).split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"{str(path)!r} line {number}: expected two tokens separated by one space, got {line!r}")
        try:
            left = parts[0].translate(to_latin1).encode("latin-1")
            right = parts[1].translate(to_latin1).encode("latin-1")
        except UnicodeEncodeError:
            message = non_printable_message(parts[0]) or non_printable_message(parts[1])
            raise ValueError(f"{str(path)!r} line {number}: {message}") from None
        merges.append((left, right))
    return merges


def load_vocab_merges(
    vocab_path: PathLike, merges_path: PathLike
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """``(load_vocab(vocab_path), load_merges(merges_path))``."""
    return load_vocab(vocab_path), load_merges(merges_path)
