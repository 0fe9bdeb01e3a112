"""End-to-end smoke runs of the reference, one per profile.

    lmspec smoke [--profile NAME] [--out DIR] [--no-typecheck] [--max-seconds S]
    python -m tools.smoke ...

A profile's smoke run is the module ``tools/smoke/NAME.py`` (its docstring
says what it runs and checks) with one entry, ``run(args, smoke)``, that
fills a ``harness.Smoke`` stage by stage, and a ``BUDGET_S``: the wall-clock
seconds it is meant to take. The harness (``harness.py``) times the stages,
prints the checks, writes ``summary.json`` in the output folder (a temporary
one unless ``--out`` is given) and exits with status 1 naming each failed
check. What the runs measure against (a corpus, the unigram model, exact
state equality) is in ``measures.py``.
"""

import argparse
import importlib
import os
import pkgutil
import sys
from pathlib import Path

DEFAULT = "cs336"
#: Modules of this package that are not a profile's smoke run.
SHARED = frozenset({"harness", "measures"})
PROFILES: tuple[str, ...] = tuple(
    sorted(
        (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and m.name not in SHARED),
        key=lambda n: (n != DEFAULT, n),
    )
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lmspec smoke",
        description="End-to-end smoke run of a profile's reference: "
        "for cs336, BPE -> encode -> train -> resume -> generate.",
    )
    parser.add_argument(
        "--profile", choices=PROFILES, default=DEFAULT, help=f"whose reference to run (default: {DEFAULT})"
    )
    parser.add_argument("--out", type=Path, default=None, help="keep outputs here (default: a temp dir)")
    parser.add_argument(
        "--no-typecheck",
        action="store_true",
        help="run with JAXTYPING_DISABLE=1 (no runtime shape/type checks)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="fail if the run takes longer (default: report the profile's budget only)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.no_typecheck:
        if "reference" in sys.modules or "lmspec.reference" in sys.modules:
            parser.error("--no-typecheck must be decided before `reference` is imported")
        os.environ["JAXTYPING_DISABLE"] = "1"
    from . import harness

    profile = importlib.import_module(f"{__name__}.{args.profile}")
    return harness.execute(profile.run, args, profile.BUDGET_S)
