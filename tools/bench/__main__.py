"""``python -m tools.bench [--quick] [--only bpe,encode,train,suite] [--out bench-out/]``.

Writes ``OUT/bench.json`` (every measurement, the machine, load averages) and
``OUT/bench.md`` (the tables, also printed). Corpora are cached in
``OUT/cache`` (not in git). ``--quick`` runs every section on tiny inputs in
well under a minute: a smoke test of the machinery, not a measurement.
"""

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from lmspec.tools.bench import bpe, encode, grading, startup, suite, train
from lmspec.tools.bench.common import load_1min, machine_info

SECTIONS = ("bpe", "encode", "train", "suite", "grading", "startup", "gradings")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="tiny inputs, one repeat (smoke test)")
    p.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma list of sections (default: all of {','.join(SECTIONS)})",
    )
    p.add_argument("--out", default="bench-out", type=Path, help="output folder (bench-out)")
    p.add_argument("--profile", action="store_true", help="also write torch profiler tables")
    p.add_argument("--suite-repeats", type=int, default=1, help="runs of each suite command (default 1)")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"--only: unknown section(s) {', '.join(unknown)}; choose from {SECTIONS}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    own_tokenizer_dir = cache / ("own-tokenizer-quick" if args.quick else "own-tokenizer-10k")
    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[bench {time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    report: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "quick": args.quick,
        "machine": machine_info(),
        "load_start": load_1min(),
        "sections": {},
    }
    markdown = []
    for section in SECTIONS:
        if section not in args.sections:
            continue
        t0 = time.perf_counter()
        result, title, table = _run_section(section, args, out, cache, own_tokenizer_dir, log)
        result["section_wall_s"] = time.perf_counter() - t0
        report["sections"][section] = result
        markdown.append(f"## {title} ({result['section_wall_s']:.0f} s)\n\n{table}\n")
        # written after every section: a late failure keeps the earlier results
        report["load_end"] = load_1min()
        report["total_wall_s"] = time.perf_counter() - start
        (out / "bench.json").write_text(json.dumps(report, indent=1, default=str))
    header = _header(report, quick=args.quick, total_s=time.perf_counter() - start)
    text = header + "\n" + "\n".join(markdown)
    (out / "bench.md").write_text(text)
    (out / "bench.json").write_text(json.dumps(report, indent=1, default=str))
    print(text)
    return 0


def _run_section(
    section: str, args: Any, out: Path, cache: Path, own_tokenizer_dir: Path, log: Any
) -> tuple[dict[str, Any], str, str]:
    """One section's measurements, its title and its table."""
    if section == "bpe":
        result = bpe.run(out, cache, quick=args.quick, log=log, own_tokenizer_dir=own_tokenizer_dir)
        return result, "1. BPE training", bpe.tables(result)
    if section == "encode":
        result = encode.run(out, cache, quick=args.quick, log=log, own_tokenizer_dir=own_tokenizer_dir)
        return result, "2. Encoding", encode.tables(result)
    if section == "train":
        result = train.run(out, quick=args.quick, log=log, profile=args.profile)
        return result, "3. Training step", train.tables(result)
    if section == "suite":
        result = suite.run(quick=args.quick, log=log, repeats=args.suite_repeats)
        return result, "4. The suite", suite.tables(result)
    if section == "grading":
        result = grading.run(quick=args.quick, log=log)
        return result, "5. The judge and its sandboxed worker", grading.tables(result)
    if section == "startup":
        result = startup.run(quick=args.quick, log=log)
        return result, "6. Starting", startup.tables(result)
    result = grading.distribution(quick=args.quick, log=log)
    return result, "7. Grading typical submissions", grading.distribution_tables(result)


def _header(report: dict[str, Any], *, quick: bool, total_s: float) -> str:
    m = report["machine"]
    return (
        f"# lmspec benchmarks{' (--quick)' if quick else ''}\n\n"
        f"{m['cpu_model']}, {m['logical_cpus']} CPUs, {m['ram_bytes'] / 2**30:.0f} GiB; "
        f"Python {m['python']}, torch {m['torch']}, tokenizers {m['tokenizers']}, "
        f"tiktoken {m['tiktoken']}; load (1 min) {report['load_start']:.1f} at start, "
        f"{report.get('load_end', load_1min()):.1f} at end; "
        f"total {total_s:.0f} s\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
