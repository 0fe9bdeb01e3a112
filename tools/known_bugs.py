"""``python -m lmspec.tools.known_bugs``: every likely cause the suite can
name, per profile and spec item, read from the registries themselves
(conformance/hints.py ``KnownBugs`` beside each oracle, the older tables of
BPE training, encode and AdamW, and the parts that can explain a composite),
as the page docs/known-bugs.md. ``--write`` rewrites the page;
tests/test_known_bugs_page.py checks that it is current.

    python -m lmspec.tools.known_bugs            print the page
    python -m lmspec.tools.known_bugs --write    rewrite docs/known-bugs.md
"""

import argparse
import sys
from collections import defaultdict

from lmspec import ROOT
from lmspec.conformance import hints, profiles

PAGE = ROOT / "docs" / "known-bugs.md"

HEADER = """# Known bugs: the likely causes a failure can name

Generated from the registries by `python -m lmspec.tools.known_bugs --write`
(tests/test_known_bugs_page.py fails when this page is not current): edit the
registries, not this page. A cause is shown only when replaying it reproduces
the implementation's output on the failing input and on a second input of the
same test (docs/architecture.md, "A hint"); how a rule's switches are chosen:
docs/architecture.md, "Choosing a rule's switches".

"""


def causes() -> dict[str, dict[str, list[str]]]:
    """profile -> item -> its causes, in registration order."""
    from lmspec.conformance.cs336.oracles import bpe_replay, nn_bugs, training
    from lmspec.conformance.cs336.oracles import tokenizer as tok
    from lmspec.conformance.cs336.parts import SWAPS
    from lmspec.conformance.encdec import known_bugs as encdec_bugs
    from lmspec.conformance.encdec.parts import SWAPS as ENCDEC_SWAPS
    from lmspec.conformance.gpt2 import known_bugs as gpt2_bugs
    from lmspec.conformance.gpt2.parts import SWAPS as GPT2_SWAPS

    found: dict[str, list[str]] = defaultdict(list)
    registries = (
        nn_bugs.KNOWN_BUGS,
        training.KNOWN_BUGS,
        gpt2_bugs.KNOWN_BUGS,
        encdec_bugs.KNOWN_BUGS,
        bpe_replay.VOCAB_BUGS,
        tok.KNOWN_BUGS,
    )
    for registry in registries:
        for bug in registry:
            found[bug.item].append(bug.cause)
    found["1.2.train_bpe"] += list(bpe_replay.KNOWN_BUGS)
    found["1.3.encode"] += list(tok.ENCODE_BUGS.values())
    # the AdamW table builds its replays lazily: its causes need no inputs
    found["3.adamw"] += [c for c, _ in training.adamw_bug_hints([], [], None, None, [])]
    for composite, parts in (SWAPS | GPT2_SWAPS | ENCDEC_SWAPS).items():
        found[composite] += [hints.explained_by(part) for part, _ in parts]
    found["3.checkpoint"].append(hints.explained_by("3.adamw"))  # test_data_checkpoint's swap
    by_profile: dict[str, dict[str, list[str]]] = {}
    for profile in profiles.all_profiles():
        items = {}
        for item in profile.items:
            keys = [k for k in found if k == item.id or k.startswith(item.id + "/")]
            listed = [f"{k.partition('/')[2]}: {c}" if "/" in k else c for k in keys for c in found[k]]
            if listed:
                items[item.id] = listed
        by_profile[profile.name] = items
    return by_profile


def page() -> str:
    lines = [HEADER.rstrip("\n"), ""]
    for profile, items in causes().items():
        total = sum(map(len, items.values()))
        lines += [f"## {profile} ({total} causes over {len(items)} items)", ""]
        for item, listed in items.items():
            lines.append(f"### {item}")
            lines.append("")
            lines += [f"- {c}" for c in listed]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmspec.tools.known_bugs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {PAGE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = page()
    if args.write:
        PAGE.write_text(text, encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
