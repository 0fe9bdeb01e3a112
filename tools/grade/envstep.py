"""Steps of building a submission's environment that run INSIDE the build
sandbox (tools/grade/envs.py starts them, one bubblewrap per step), run by
the interpreter the grader chose, never by the environment's own. A
standalone file: it imports nothing of lmspec (it is bound read-only into
the sandbox on its own).

    python envstep.py create VENV [--system-site] [--pth DIR ...]
    python envstep.py install VENV --wheels DIR --constraints FILE [--local NAME=PATH ...] [--requirement REQ ...]

``create`` makes the venv (with pip, from the interpreter's own bundled
wheel: no network) and a ``.pth`` file that puts the grader's
site-packages behind the venv's (torch and the scientific stack are reused).
``install`` installs the requirements offline (``--no-index``, from the
wheels a network step downloaded, under the constraints that keep the
grader's distributions); a local dependency (a folder or an archive of the
repository, a ``file:`` requirement) is copied to /tmp first (the
repository is read-only) and built there: that build runs the submission's
code, here, without network. Exit status: pip's.
"""

import argparse
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

PTH_NAME = "_lmspec_grader_site.pth"


def create(args: argparse.Namespace) -> int:
    # no pip of its own: the grader's (or the interpreter's) pip is on its path through the .pth file
    venv.create(args.venv, system_site_packages=args.system_site, with_pip=False, symlinks=True)
    sites = sorted(Path(args.venv).glob("lib/python*/site-packages"))
    if not sites:
        print(f"no site-packages in {args.venv}", file=sys.stderr)
        return 1
    if args.pth:
        (sites[0] / PTH_NAME).write_text("\n".join(args.pth) + "\n", encoding="utf-8")
    return 0


def install(args: argparse.Namespace) -> int:
    requirements = list(args.requirement)
    scratch = Path(os.environ.get("TMPDIR") or "/tmp") / "local"
    for i, item in enumerate(args.local):
        requirement, _, source = item.partition("=")
        dest = scratch / str(i) / Path(source).name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).is_dir():
            shutil.copytree(source, dest, symlinks=True)
        else:
            shutil.copyfile(source, dest)
        requirements.append(f"{requirement} @ {dest.as_uri()}")
    pip = [str(Path(args.venv) / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-cache-dir"]
    pip += ["--disable-pip-version-check", "--no-input", "--find-links", args.wheels, "-c", args.constraints]
    return subprocess.run([*pip, *requirements]).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="envstep")
    sub = p.add_subparsers(dest="step", required=True)
    c = sub.add_parser("create")
    c.add_argument("venv")
    c.add_argument("--system-site", action="store_true")
    c.add_argument("--pth", action="append", default=[])
    i = sub.add_parser("install")
    i.add_argument("venv")
    i.add_argument("--wheels", required=True)
    i.add_argument("--constraints", required=True)
    i.add_argument("--local", action="append", default=[], metavar="NAME=PATH")
    i.add_argument("--requirement", action="append", default=[], metavar="REQ")
    args = p.parse_args(argv)
    return create(args) if args.step == "create" else install(args)


if __name__ == "__main__":
    sys.exit(main())
