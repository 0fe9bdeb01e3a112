"""nox sessions for lmspec. `nox -s lint tests` is what CI runs (.ci/run).

torch is installed first, pinned by LMSPEC_TORCH (default ``torch==2.13.0``,
the CPU wheel on lmspec's machines): asking pip for plain ``torch`` in a fresh
environment downloads the newest CUDA build (several GB). On a GPU machine
set LMSPEC_TORCH to the CUDA build you want, e.g.
``LMSPEC_TORCH="torch --index-url https://download.pytorch.org/whl/cu124"``.
"""

import os
import shlex

import nox

nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

TORCH = shlex.split(os.environ.get("LMSPEC_TORCH", "torch==2.13.0"))
PYTEST_SUITE = ["-p", "no:cacheprovider", "--hypothesis-profile", "ci"]


def install(session: nox.Session, extras: str = "plot") -> None:
    session.install(*TORCH)
    session.install("-e", f".[{extras}]")


@nox.session
def tests(session: nox.Session) -> None:
    """The conformance suite on the reference, the meta-tests, the smoke run."""
    install(session, "plot,batch")
    jobs = os.environ.get("LMSPEC_JOBS", "2")
    session.run("python", "-m", "pytest", "conformance", "-n", jobs, "--durations=10", *PYTEST_SUITE, *session.posargs)
    session.run("python", "-m", "pytest", "tests", "-n", jobs, "--durations=10", *PYTEST_SUITE, *session.posargs)


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
