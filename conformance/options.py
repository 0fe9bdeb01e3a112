"""Every option of the grader and of the suite's pytest plugin, declared once.

``lmspec grade`` (tools/grade/cli.py) and the plugin (``pytest conformance
...``, conformance/plugin.py) both build their command lines from OPTIONS;
the grader forwards the ones marked ``judge`` to the judge process it starts
(conformance/judge/launch.py), so a default, a help text or a choice lives
in one place. ``Settings`` holds the values of one run: the grader makes it
from its arguments, the plugin from pytest's; tools that start a judge
themselves (the mutant and variant runners, the benchmarks, the batch) make
one with ``Settings(**changes)``.
"""

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: Where an option is offered: the grader's command line, the pytest plugin's.
GRADE, SUITE = "grade", "suite"
BATCH = "batch (a whole course, on Dask distributed: pip install 'lmspec[batch]')"


@dataclass(frozen=True)
class Option:
    """One option. ``flags``: its spellings (the first is the canonical one);
    ``judge``: the grader passes it on to the judge (both scopes then; one of
    the suite's scope only is set by lmspec's own tools, never by a grader);
    ``env``: an environment variable that supplies the default."""

    dest: str
    flags: tuple[str, ...]
    default: Any
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    flag: bool = False  # a switch (store_true)
    scopes: frozenset[str] = frozenset({GRADE, SUITE})
    judge: bool = False
    env: str | None = None
    append: bool = False
    group: str = ""  # a heading of its own in --help

    def initial(self) -> Any:
        value = os.environ.get(self.env) if self.env else None
        if value is None or value == "":
            return self.default
        return self.type(value) if self.type is not None else value


def _both(*args: Any, **kwargs: Any) -> Option:
    return Option(*args, scopes=frozenset({GRADE, SUITE}), judge=True, **kwargs)


def _grade(*args: Any, **kwargs: Any) -> Option:
    return Option(*args, scopes=frozenset({GRADE}), **kwargs)


def _suite(*args: Any, **kwargs: Any) -> Option:
    return Option(*args, scopes=frozenset({SUITE}), **kwargs)


OPTIONS: tuple[Option, ...] = (
    # --- what is graded, and how it is isolated (grader and suite) ---
    Option(
        "adapter",
        ("--adapter",),
        None,
        "the implementation under test: a repository folder, an adapters file or a module name (the grader "
        "also takes it as its TARGET argument; default: lmspec's reference)",
        env="LMSPEC_ADAPTER",
    ),
    _both(
        "profile",
        ("--profile",),
        None,
        "the curriculum the implementation follows: cs336, gpt2 or encdec (default: recognised from the names "
        "the submission defines)",
        metavar="NAME",
    ),
    _both("spec", ("--spec",), None, "only these spec ids (comma list, prefix match: '2' = all of §2)", metavar="IDS"),
    _both(
        "sandbox",
        ("--sandbox",),
        "auto",
        "isolation of the submission: bwrap (bubblewrap), none, or auto (bubblewrap when it works, else none with "
        "a loud warning)",
        choices=("auto", "bwrap", "none"),
        env="LMSPEC_SANDBOX",
    ),
    _both(
        "timeout_per_call",
        ("--timeout-per-call",),
        60.0,
        "a call into the submission without an answer after S s kills its worker; that function is not called "
        "again (60)",
        type=float,
        metavar="S",
    ),
    _both("startup_timeout", ("--startup-timeout",), 120.0, "limit to import the submission (120)", float, "S"),
    _both(
        "memory_limit",
        ("--memory-limit",),
        4.0,
        "address space of the submission's process, in GB (4; 0: none)",
        type=float,
        metavar="GB",
    ),
    _both(
        "allow_reference",
        ("--allow-reference",),
        False,
        "make lmspec's reference importable by the submission (lmspec's own mutants and variants build on it); "
        "never for grading students",
        flag=True,
    ),
    _both("python", ("--python",), None, "the interpreter that runs the submission", metavar="PATH"),
    _both(
        "fixtures",
        ("--fixtures", "--fixtures-dir"),
        None,
        "the official oracle files (else LMSPEC_FIXTURES, the graded repository's tests/fixtures, "
        "the cache of `lmspec fixtures fetch`, ../shared/fixtures)",
        metavar="DIR",
    ),
    _both(
        "device",
        ("--device",),
        "cpu",
        "devices for the numeric tests (cpu; a device other than the CPU is beyond the official tests: STRICT)",
        choices=("cpu", "cuda", "all", "auto"),
        env="LMSPEC_DEVICE",
    ),
    # --- the grader ---
    _grade("out", ("--out",), "grade-out", "output folder (default ./grade-out)", metavar="DIR"),
    _grade(
        "format",
        ("--format",),
        "table,json,junit,gradescope,html",
        "comma list of table,json,junit,gradescope,html (html: report.html, and spec.html beside it)",
    ),
    _grade("timeout", ("--timeout",), 1800.0, "overall limit per submission, in seconds (1800)", float, "S"),
    _grade("fail_under", ("--fail-under",), None, "exit 0 when score >= PCT %% of max", float, "PCT"),
    _grade(
        "chapters",
        ("--chapters",),
        None,
        "gpt2: chapters that count in full, started or not (e.g. 2-5: the chapters assigned); by default the "
        "verdict covers the chapters the reader has started",
        metavar="LIST",
    ),
    _grade(
        "jobs",
        ("--jobs",),
        None,
        "judge processes grading one submission, each with its sandboxed worker (default: min(cores, 4); in a "
        "batch 1 per submission, see --workers)",
        type=int,
        metavar="N",
    ),
    _grade(
        "hypothesis_profile",
        ("--hypothesis-profile",),
        "ci",
        "dev, ci (default) or thorough",
        metavar="P",
        choices=("dev", "ci", "thorough"),
    ),
    _grade("points", ("--points",), None, "JSON points table (docs/grading.md)", metavar="FILE"),
    _grade(
        "suite", ("--suite",), None, "test paths (default: the profile's test modules)", metavar="PATH", append=True
    ),
    _grade(
        "env",
        ("--env",),
        "none",
        "auto: give each submission an environment of its own with its declared dependencies, built in a "
        "sandbox (reusing the grader's torch; cached); none: the grader's environment as it is",
        choices=("none", "auto"),
    ),
    _grade("env_cache", ("--env-cache",), None, "where --env auto keeps environments", metavar="DIR"),
    _grade(
        "batch",
        ("--batch",),
        None,
        "grade every submission in DIR (its folders and its *.py adapters files), one Dask task each; writes per "
        "submission results under --out/NAME/, then summary.csv and dashboard.html",
        metavar="DIR",
        group=BATCH,
    ),
    _grade(
        "workers",
        ("--workers",),
        None,
        "size of the local Dask cluster: N single-threaded worker processes (default: the machine's cores)",
        type=int,
        metavar="N",
        group=BATCH,
    ),
    _grade(
        "scheduler",
        ("--scheduler",),
        None,
        "use the Dask cluster at ADDRESS (tcp://host:8786) instead of a local one",
        metavar="ADDRESS",
        group=BATCH,
    ),
    _grade(
        "regrade",
        ("--regrade",),
        False,
        "grade again the submissions whose results under --out are for the same content and settings",
        flag=True,
        group=BATCH,
    ),
    _grade("timings", ("--timings",), False, "print where the grading's time went (also in results.json)", flag=True),
    _grade("quiet", ("--quiet",), False, "no progress display and no table", flag=True),
    _grade(
        "watch",
        ("--watch",),
        False,
        "grade again whenever a file of the submission changes, printing only what changed (with --spec: "
        "the items you are fixing); Ctrl-C stops",
        flag=True,
    ),
    # --- the suite's plugin ---
    # passed on to the judge (lmspec's own meta-tests, tools/mutants.py), never a grader's option
    Option(
        "in_process",
        ("--in-process",),
        False,
        "DEBUG ONLY: run the implementation in this process",
        flag=True,
        scopes=frozenset({SUITE}),
        judge=True,
    ),
    _suite("max_examples", ("--max-examples",), None, "Hypothesis max_examples override", int),
    _suite(
        "shrink_budget",
        ("--shrink-budget",),
        10.0,
        "seconds Hypothesis may spend shrinking one failure (10): past it, the failure is shown as far as it got, "
        "and the report says so",
        float,
    ),
    _suite("xfails_file", ("--xfails-file",), None, "file of test-id substrings to mark xfail"),
    _suite("skips_file", ("--skips-file",), None, "file of test-id substrings to skip"),
    _suite("list_spec", ("--list-spec",), False, "list spec items with their tests and exit", flag=True),
    _suite("lmspec_report", ("--lmspec-report",), None, "write a per-test JSON report to this path"),
    _suite("lmspec_progress", ("--lmspec-progress",), None, "append one JSON line per finished test"),
    _suite("lmspec_target", ("--lmspec-target",), None, "the target as the grader resolved it (a JSON file)"),
)

BY_DEST: dict[str, Option] = {o.dest: o for o in OPTIONS}

Settings = dataclasses.make_dataclass(
    "Settings",
    [(o.dest, Any, dataclasses.field(default=o.default)) for o in OPTIONS],
    frozen=True,
    namespace={
        "__doc__": "The values of every option for one run (defaults: OPTIONS).",
        "replace": lambda self, **changes: dataclasses.replace(self, **changes),
    },
)


def options(scope: str) -> Iterator[Option]:
    return (o for o in OPTIONS if scope in o.scopes)


def add_to_argparse(parser: argparse.ArgumentParser | Any, scope: str = GRADE, skip: tuple[str, ...] = ()) -> None:
    """Declare the options of ``scope`` on an argparse parser (those with a
    ``group`` under that heading)."""
    groups: dict[str, Any] = {}
    for o in options(scope):
        if o.dest in skip:
            continue
        target = parser
        if o.group:
            target = groups.setdefault(o.group, parser.add_argument_group(o.group))
        kwargs: dict[str, Any] = {"dest": o.dest, "help": o.help, "default": o.initial()}
        if o.flag:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=o.type, metavar=o.metavar, choices=o.choices)
            if o.append:
                kwargs["action"] = "append"
        target.add_argument(*o.flags, **kwargs)


#: Flags pytest itself owns: the plugin leaves those spellings out.
_PYTEST_OWN = frozenset({"--fixtures"})


def add_to_pytest(group: Any) -> None:
    """Declare the suite's options on the plugin's pytest option group."""
    for o in options(SUITE):
        flags = [f for f in o.flags if f not in _PYTEST_OWN]
        kwargs: dict[str, Any] = {"dest": o.dest, "help": o.help, "default": o.initial()}
        if o.flag:
            kwargs["action"] = "store_true"
        else:
            kwargs.update(type=o.type, metavar=o.metavar, choices=o.choices)
        group.addoption(*flags, **kwargs)


def from_namespace(values: Any) -> Any:
    """Settings from an argparse namespace (options missing from it keep their defaults)."""
    return Settings(**{o.dest: getattr(values, o.dest) for o in OPTIONS if hasattr(values, o.dest)})


def from_pytest(config: Any) -> Any:
    return Settings(**{o.dest: config.getoption(o.dest) for o in options(SUITE)})


def judge_arguments(settings: Any) -> list[str]:
    """The command-line arguments that pass ``settings`` on to the judge."""
    args: list[str] = []
    for o in OPTIONS:
        if not o.judge:
            continue
        value = getattr(settings, o.dest)
        pytest_flag = next(f for f in o.flags if f not in _PYTEST_OWN)
        if o.flag:
            args += [pytest_flag] if value else []
        elif value is not None:
            args += [pytest_flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return args
