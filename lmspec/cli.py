"""The ``lmspec`` command: one entry point, one subcommand per job.

Start-up stays cheap: this module imports nothing heavy, and a subcommand's
own module is imported only when that subcommand runs (``lmspec --help``
never imports torch).
"""

import importlib
import sys

#: subcommand -> (module, function, prefix arguments, one-line help)
COMMANDS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "grade": ("lmspec.tools.grade.cli", "main", (), "grade an implementation (a CS336 repository, an adapters file)"),
    "fixtures": ("lmspec.tools.fixtures", "main", (), "store the official oracle files, verified, in the cache"),
    "spec": ("lmspec.tools.spec", "main", (), "show the specification, whole or one item"),
    "train-bpe": ("lmspec.reference.cli", "main", ("train-bpe",), "train a byte-level BPE tokenizer (reference)"),
    "encode": ("lmspec.reference.cli", "main", ("encode",), "encode a text file into a token array (reference)"),
    "train": ("lmspec.reference.cli", "main", ("train",), "train a Transformer LM (reference)"),
    "generate": ("lmspec.reference.cli", "main", ("generate",), "generate text from a checkpoint (reference)"),
    "snapshots": ("lmspec.tools.snapshots", "main", (), "regenerate or verify the golden snapshots"),
    "smoke": ("lmspec.tools.smoke", "main", (), "the end-to-end training smoke run"),
    "bench": ("lmspec.tools.bench.__main__", "main", (), "benchmarks against the tools users would otherwise pick"),
    "mutants": ("lmspec.tools.mutants", "main", (), "kill table of the suite's mutant catalog (from a checkout)"),
}

USAGE = "usage: lmspec [-h] [--version] COMMAND [ARGS...]"


def _help() -> str:
    width = max(map(len, COMMANDS))
    lines = [
        USAGE,
        "",
        "Conformance suite, grader and reference implementation for building a language model",
        "from scratch (CS336 assignment 1). `lmspec COMMAND --help` tells more.",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}}  {entry[3]}" for name, entry in COMMANDS.items()]
    lines += ["", "examples:", "  lmspec grade ~/my-cs336-repo", "  lmspec spec 2.rope"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(_help())
        return 0 if args else 2
    if args[0] == "--version":
        from lmspec import __version__

        print(f"lmspec {__version__}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"{USAGE}\nlmspec: unknown command {args[0]!r} (choose from {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    module, function, prefix, _ = command
    run = getattr(importlib.import_module(module), function)
    # the reference's commands name the program the user typed in their messages
    result = run([*prefix, *args[1:]], prog="lmspec") if prefix else run(args[1:])
    return int(result or 0)
