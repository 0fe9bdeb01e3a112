"""Golden snapshots: small .npz files of adapter inputs and the reference's
float32 outputs, with a sha256 MANIFEST.

    python -m tools.snapshots regenerate   # rewrite snapshots/ from reference/
    python -m tools.snapshots verify       # MANIFEST hashes match the files
    python -m tools.snapshots verify --regenerate   # ... and regenerating reproduces them

Every golden is checked against the float64 oracle of conformance/cs336/oracles
before it is written, so a snapshot never records a reference bug. Inputs are
stored in the file (seeded with the case's seed, shapes below), so the goldens
do not depend on torch's RNG staying the same across versions.

What "reproduces" means: regenerated inputs, scalars and metadata equal the
stored ones byte for byte, and the regenerated output is within the op's
float32 tolerance of the stored golden. Float32 outputs cannot be compared
bitwise across machines: CPUs with and without AVX-512 take different ATen
kernels and differ by a few ulp (measured: up to 9.5e-7 on the LM logits,
against a tolerance of 5e-5).
"""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["regenerate", "verify"])
    parser.add_argument(
        "--regenerate",
        action="store_true",
        help="verify: also regenerate in memory and compare (inputs bitwise, outputs within tolerance)",
    )
    args = parser.parse_args(argv)
    from lmspec.tools import snapshot_cases as cases

    if args.command == "regenerate":
        cases.regenerate()
        return 0
    problems = cases.verify(args.regenerate)
    for p in problems:
        print(f"snapshot drift: {p}")
    print("snapshots OK" if not problems else f"{len(problems)} snapshot problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
