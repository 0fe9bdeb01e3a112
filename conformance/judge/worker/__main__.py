"""Entry point of the worker process:

    python -m lmspec_worker --fd-in 3 --fd-out 4 --adapter PATH_OR_MODULE
        [--root DIR] [--scratch DIR] [--path DIR ...] [--binder NAME] [--data NAME=PATH ...]

Reads request frames on --fd-in and writes replies on --fd-out; stdout and
stderr carry the submission's own output, which the judge captures. The
judge's --in-process mode parses the same arguments (``parse``), so both
ways start the same server.
"""

import argparse
import faulthandler
import os
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lmspec_worker")
    p.add_argument("--fd-in", type=int, default=None)
    p.add_argument("--fd-out", type=int, default=None)
    p.add_argument("--adapter", required=True)
    p.add_argument("--root", default=None, type=Path)
    p.add_argument("--scratch", default=None, type=Path)
    p.add_argument("--path", action="append", default=[])
    p.add_argument("--binder", default=None)
    p.add_argument("--data", action="append", default=[], metavar="NAME=PATH")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    args = parser().parse_args(argv)
    args.scratch = args.scratch or Path(os.environ.get("TMPDIR") or "/tmp")
    args.data = dict(item.split("=", 1) for item in args.data)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    faulthandler.enable(sys.stderr)  # a segfault names itself on stderr, which the judge reads

    from .serve import serve_fds

    return serve_fds(args.fd_in, args.fd_out, args)


if __name__ == "__main__":
    sys.exit(main())
