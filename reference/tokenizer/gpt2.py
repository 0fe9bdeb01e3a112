"""GPT-2's printable rendering of bytes (``bytes_to_unicode``), used by the save format.

GPT-2's ``vocab.json`` and ``merges.txt`` (and the official CS336 training
oracles) write each token as a string with one printable character per byte:
the 188 bytes that are already printable, non-space Latin-1 characters
(``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) stand for themselves, and the other
68 bytes (controls, space, DEL, NBSP, soft hyphen) are mapped in increasing
order to U+0100, U+0101, ... So a space is ``Ġ`` (U+0120), a newline ``Ċ``
(U+010A). No printable character is whitespace, which is why a merges line
``"Ġt he"`` splits unambiguously on its one space.

Example: ``bytes_to_printable(b" the\\n") == "ĠtheĊ"``.
"""

import functools

__all__ = [
    "bytes_to_printable",
    "gpt2_bytes_to_unicode",
    "gpt2_unicode_to_bytes",
    "non_printable_message",
    "printable_to_bytes",
    "printable_translation_tables",
]


@functools.cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 map byte value -> printable character (a bijection onto 256 characters)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return dict(sorted(mapping.items()))


@functools.cache
def gpt2_unicode_to_bytes() -> dict[str, int]:
    """Inverse of :func:`gpt2_bytes_to_unicode`: printable character -> byte value."""
    return {c: b for b, c in gpt2_bytes_to_unicode().items()}


@functools.cache
def printable_translation_tables() -> tuple[dict[int, str], dict[int, str]]:
    """``str.translate`` tables for bulk conversion (one C call per token, no per-byte Python).

    ``to_printable``: applied to ``token.decode("latin-1")`` gives the printable form.
    ``to_latin1``: applied to a printable string, then ``.encode("latin-1")``, gives
    the bytes; characters outside the alphabet become U+FFFF so that the encode
    fails (the caller then reports the character through ``printable_to_bytes``).
    """
    forward = gpt2_bytes_to_unicode()
    to_printable = {b: forward[b] for b in range(256)}
    to_latin1: dict[int, str] = {b: "\uffff" for b in range(256)}
    to_latin1.update({ord(c): chr(b) for b, c in forward.items()})
    return to_printable, to_latin1


def bytes_to_printable(token: bytes) -> str:
    """Render a token's bytes in GPT-2 printable form (``b" a"`` -> ``"Ġa"``)."""
    return token.decode("latin-1").translate(printable_translation_tables()[0])


def non_printable_message(text: str) -> str:
    """Describe the first character of ``text`` outside the printable alphabet ("" if none)."""
    inverse = gpt2_unicode_to_bytes()
    for i, c in enumerate(text):
        if c not in inverse:
            return (
                f"{text!r}: character {c!r} (U+{ord(c):04X}) at index {i} is not in "
                "GPT-2's bytes-to-unicode printable alphabet"
            )
    return ""


def printable_to_bytes(text: str) -> bytes:
    """Inverse of :func:`bytes_to_printable`.

    Raises:
        ValueError: a character is not one of the 256 printable byte stand-ins;
            the message names it and its index.
    """
    try:
        return text.translate(printable_translation_tables()[1]).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(non_printable_message(text)) from None
