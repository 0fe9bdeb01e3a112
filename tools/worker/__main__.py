"""Entry point of the worker process:

    python -m lmspec_worker --fd-in 3 --fd-out 4 --adapter PATH_OR_MODULE
        [--root DIR] [--scratch DIR] [--path DIR ...]

Reads request frames on --fd-in and writes replies on --fd-out; stdout and
stderr carry the submission's own output, which the judge captures.
"""

import argparse
import faulthandler
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmspec_worker")
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--root", default=None)
    parser.add_argument("--scratch", default=None)
    parser.add_argument("--path", action="append", default=[])
    args = parser.parse_args(argv)
    faulthandler.enable(sys.stderr)  # a segfault names itself on stderr, which the judge reads

    from .serve import serve_fds

    scratch = Path(args.scratch or os.environ.get("TMPDIR") or "/tmp")
    root = Path(args.root) if args.root else None
    return serve_fds(args.fd_in, args.fd_out, args.adapter, root, scratch, tuple(args.path))


if __name__ == "__main__":
    sys.exit(main())
