"""nox sessions for lmspec. `nox -s lint full` is what CI runs (.ci/run).

``tests`` is the fast suite a contributor runs: every profile's conformance
suite on its reference, the unit and tool tests, and a small deterministic
sample of the meta-test catalog; ``meta`` is the rest of that catalog (every
mutant, variant and hostile submission: the tests marked ``catalog``,
tests/conftest.py) and the long end-to-end runs; ``full`` runs both in one
environment (one install of torch and lmspec instead of two, about 2 min on
2 cores). README "Run the tests" gives the durations.

torch is installed first, pinned by LMSPEC_TORCH (default ``torch==2.13.0``,
the CPU wheel on lmspec's machines): asking pip for plain ``torch`` in a fresh
environment downloads the newest CUDA build (several GB). On a GPU machine
set LMSPEC_TORCH to the CUDA build you want, e.g.
``LMSPEC_TORCH="torch --index-url https://download.pytorch.org/whl/cu124"``.
"""

import os
import shlex
from pathlib import Path

import nox

nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

TORCH = shlex.split(os.environ.get("LMSPEC_TORCH", "torch==2.13.0"))
PYTEST_SUITE = ["-p", "no:cacheprovider", "--hypothesis-profile", "ci"]
DEFAULT_PROFILE = "cs336"


def profiles() -> list[str]:
    """The profiles lmspec knows, as conformance.profiles.NAMES finds them (one module each), the default first."""
    names = [p.stem for p in Path(__file__).parent.joinpath("conformance", "profiles").glob("*.py")]
    return sorted((n for n in names if not n.startswith("_")), key=lambda n: (n != DEFAULT_PROFILE, n))


def install(session: nox.Session, extras: str = "plot") -> None:
    session.install(*TORCH)
    session.install("-e", f".[{extras}]")


def run_fast_suite(session: nox.Session) -> None:
    jobs = os.environ.get("LMSPEC_JOBS", "2")
    for profile in profiles():
        session.run(
            "python", "-m", "pytest", "conformance", "--profile", profile, "-n", jobs, "--durations=5",
            *PYTEST_SUITE, *session.posargs,
        )  # fmt: skip
    session.run(
        "python", "-m", "pytest", "tests", "-m", "not catalog", "-n", jobs, "--durations=10",
        *PYTEST_SUITE, *session.posargs,
    )  # fmt: skip


def run_catalog(session: nox.Session) -> None:
    jobs = os.environ.get("LMSPEC_JOBS", "2")
    session.run(
        "python", "-m", "pytest", "tests", "-m", "catalog", "-n", jobs, "--durations=10",
        *PYTEST_SUITE, *session.posargs,
    )  # fmt: skip


@nox.session
def tests(session: nox.Session) -> None:
    """The fast suite: each profile's conformance suite on its reference, the
    unit and tool tests, a sample of the meta-test catalog."""
    install(session, "plot,batch")
    run_fast_suite(session)


@nox.session
def meta(session: nox.Session) -> None:
    """The full meta-test catalog (every mutant must die, every variant and
    fixture repository pass, every hostile submission be contained) and the
    long end-to-end runs."""
    install(session, "plot,batch")
    run_catalog(session)


@nox.session
def full(session: nox.Session) -> None:
    """``tests`` then ``meta`` in one environment: what CI runs. The catalog runs even when
    the fast suite failed, as it did when they were two sessions of one nox command."""
    from nox.command import CommandFailed

    install(session, "plot,batch")
    failed = []
    for part in (run_fast_suite, run_catalog):
        try:
            part(session)
        except CommandFailed:
            failed.append(part.__name__)
    if failed:
        session.error(f"failed: {', '.join(failed)}")


@nox.session
def tests_cuda(session: nox.Session) -> None:
    """The device-parametrised suite on CUDA (skips with a message when no GPU)."""
    install(session)
    has_cuda = session.run("python", "-c", "import torch; print(torch.cuda.is_available())", silent=True)
    if "True" not in (has_cuda or ""):
        session.skip("no CUDA device: torch.cuda.is_available() is False")
    session.run("python", "-m", "pytest", "conformance", "--device", "all", *PYTEST_SUITE, *session.posargs)


@nox.session
def grade(session: nox.Session) -> None:
    """Grade an implementation: nox -s grade -- path/to/cs336-repo (default: the reference)"""
    install(session)
    # the oracle files, verified, into the user's cache once (what is there already is not fetched again);
    # offline this fails, and the grade then says INCOMPLETE and names the command
    session.run("lmspec", "fixtures", "fetch", success_codes=[0, 1])
    session.run("lmspec", "grade", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """Kill-rate table of the mutant catalog (tests/mutants)."""
    install(session)
    session.run("lmspec", "mutants", *session.posargs)


@nox.session
def snapshots(session: nox.Session) -> None:
    """Regenerate the golden snapshots and check nothing drifted."""
    install(session)
    session.run("lmspec", "snapshots", "verify", "--regenerate", *session.posargs)


@nox.session
def smoke(session: nox.Session) -> None:
    """End-to-end: BPE -> encode -> train -> resume -> generate, on CPU."""
    install(session)
    session.run("lmspec", "smoke", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the tools users would otherwise pick (BENCHMARKS.md)."""
    install(session, "plot,bench")
    session.run("lmspec", "bench", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check (CI runs it before the tests)."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
