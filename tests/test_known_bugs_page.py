"""docs/known-bugs.md is generated from the registries (tools/known_bugs.py):
it must be current, and list every registered cause and every part that can
explain a composite."""

from lmspec.conformance import hints
from lmspec.conformance.cs336.oracles import nn_bugs
from lmspec.conformance.cs336.parts import SWAPS
from lmspec.conformance.gpt2.parts import SWAPS as GPT2_SWAPS
from lmspec.tools import known_bugs


def test_the_page_is_current():
    assert known_bugs.PAGE.read_text(encoding="utf-8") == known_bugs.page(), (
        "docs/known-bugs.md is out of date: run python -m lmspec.tools.known_bugs --write"
    )


def test_the_page_lists_every_registered_cause_under_its_item():
    listed = known_bugs.causes()["cs336"]
    for bug in nn_bugs.KNOWN_BUGS:
        assert bug.cause in listed[bug.item], (bug.item, bug.cause)
    for composite, parts in SWAPS.items():
        for part, _ in parts:
            assert hints.explained_by(part) in listed[composite], (composite, part)
    gpt2 = known_bugs.causes()["gpt2"]
    for composite, parts in GPT2_SWAPS.items():
        for part, _ in parts:
            assert hints.explained_by(part) in gpt2[composite], (composite, part)
