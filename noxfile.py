"""nox sessions for lmspec. `nox -s lint full` is what CI runs (.ci/run).

``tests`` is the fast suite a contributor runs: every profile's conformance
suite on its reference, the unit and tool tests, and a small deterministic
sample of the meta-test catalog; ``meta`` is the rest of that catalog (every
mutant, variant and hostile submission: the tests marked ``catalog``,
tests/conftest.py) and the long end-to-end runs; ``full`` runs both in one
environment (one install of torch and lmspec instead of two, about 2 min on
2 cores), lmspec's tests in one pytest run. README "Run the tests" gives the
durations.

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
JOBS = os.environ.get("LMSPEC_JOBS", "2")  # pytest-xdist workers
DEFAULT_PROFILE = "cs336"


def profiles() -> list[str]:
    """The profiles lmspec knows, as conformance.profiles.NAMES finds them (one module each), the default first."""
    names = [p.stem for p in Path(__file__).parent.joinpath("conformance", "profiles").glob("*.py")]
    return sorted((n for n in names if not n.startswith("_")), key=lambda n: (n != DEFAULT_PROFILE, n))


def install(session: nox.Session, extras: str = "plot") -> None:
    session.install(*TORCH)
    session.install("-e", f".[{extras}]")


def run_conformance(session: nox.Session) -> None:
    """Each profile's conformance suite on its reference."""
    for profile in profiles():
        session.run(
            "python", "-m", "pytest", "conformance", "--profile", profile, "-n", JOBS, "--durations=5",
            *PYTEST_SUITE, *session.posargs,
        )  # fmt: skip


def run_tests(session: nox.Session, marks: str | None = None) -> None:
    """lmspec's own tests (tests/), those of the mark expression ``marks`` if one is given."""
    select = ["-m", marks] if marks else []
    session.run(
        "python", "-m", "pytest", "tests", *select, "-n", JOBS, "--durations=10", *PYTEST_SUITE, *session.posargs,
    )  # fmt: skip


@nox.session
def tests(session: nox.Session) -> None:
    """The fast suite: each profile's conformance suite on its reference, the
    unit and tool tests, a sample of the meta-test catalog."""
    install(session, "plot,batch")
    run_conformance(session)
    run_tests(session, "not catalog")


@nox.session
def meta(session: nox.Session) -> None:
    """The full meta-test catalog (every mutant must die, every variant and
    fixture repository pass, every hostile submission be contained) and the
    long end-to-end runs."""
    install(session, "plot,batch")
    run_tests(session, "catalog")


@nox.session
def full(session: nox.Session) -> None:
    """``tests`` and ``meta`` in one environment: what CI runs. lmspec's tests, fast and catalog
    alike, are one pytest run (one start of its workers; the long runs handed out first, so
    neither part waits on the other's last test); it runs even when a conformance suite failed."""
    from nox.command import CommandFailed

    install(session, "plot,batch")
    failed = []
    for name, part in (("conformance", run_conformance), ("tests", run_tests)):
        try:
            part(session)
        except CommandFailed:
            failed.append(name)
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
