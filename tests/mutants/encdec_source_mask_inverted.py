"""MUTANT (encdec): source mask polarity inverted (True on padding)."""

from lmspec.reference.encdec.adapter import *  # noqa: F403


def run_source_mask(src, pad_id):
    return (src == pad_id).unsqueeze(-2)


MUTANT = {
    "spec": "encdec.masks",
    "bug": "source mask polarity inverted (True on padding)",
    "run": ["encdec.masks"],
    "profile": "encdec",
    "hinted": ["polarity inverted (True on padding)"],
}
