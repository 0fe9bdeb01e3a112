"""pytest plugin: the judge. Selects the implementation under test and its
profile (conformance/target.py), starts its worker (sandboxed), hands tests
proxies of the profile's adapter functions as fixtures, and adds the suite's
options (conformance/options.py: ``pytest conformance --help``, group
"lmspec") and reports (conformance/report.py).

    pytest conformance                              the reference, cs336
    pytest conformance --profile gpt2               the gpt2 reference
    pytest conformance --adapter path/to/repo       a submission (profile recognised)
Hypothesis profiles: dev (default), ci (default when CI is set), thorough.
"""

import gc
import os
import shutil
import signal
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from lmspec import ROOT
from lmspec.conformance import options, profiles, report
from lmspec.conformance.fixtures import FixtureMissing, FixtureRefused, FixtureSet, folder_problem
from lmspec.conformance.judge.faults import NotImplementedByAdapter
from lmspec.conformance.judge.launch import die_with_parent, end_group_on_sigterm
from lmspec.conformance.outcomes import NOT_CHECKED_PREFIX
from lmspec.conformance.session import JudgeSession

if TYPE_CHECKING:  # torch: not imported by pytest-xdist's controller, which only starts the judge's processes
    from lmspec.conformance.judge.implementation import Implementation

# --- Hypothesis profiles ----------------------------------------------------
# No explain phase but in "thorough": it re-runs every failing test for 0.5-4.5 s to list the lines only
# failing cases ran (the suite's own asserts, to a student) and to mark the arguments that do not matter,
# and the list reached the judge's log only (BENCHMARKS.md section 11).
_common = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[p for p in Phase if p is not Phase.explain],
)
settings.register_profile("dev", max_examples=20, **_common)
settings.register_profile(
    "ci",
    parent=settings.get_profile("ci"),
    max_examples=25,
    derandomize=True,
    database=None,
    print_blob=True,
    **_common,
)
settings.register_profile("thorough", **(_common | {"max_examples": 400, "phases": list(Phase)}))
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_to_pytest(parser.getgroup("lmspec", "lmspec conformance suite"))


def session_of(config: pytest.Config) -> JudgeSession:
    return config._lmspec_session  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spec(id): the SPEC.md item a test checks (its profile's record)")
    config.addinivalue_line("markers", "slow: a test that takes seconds even in the ci profile")
    config.addinivalue_line(
        "markers",
        "strict: a STRICT rule of its spec item (SPEC.md: behaviour beyond the course's contract; "
        "reported per item, never scored)",
    )
    workerinput = getattr(config, "workerinput", None)
    given_fixtures = config.getoption("fixtures")
    problem = folder_problem(given_fixtures) if given_fixtures else None
    if problem is not None:
        raise pytest.UsageError(problem.replace("--fixtures ", "--fixtures-dir ", 1))
    if config.getoption("lmspec_target") and workerinput is None:
        end_group_on_sigterm()  # a judge the grader started: a SIGTERM ends its workers too
    if workerinput is not None:
        die_with_parent(signal.SIGKILL)()  # an xdist worker outlives no judge
        session_dir = workerinput["lmspec_session_dir"]
    else:
        session_dir = tempfile.mkdtemp(prefix="lmspec-session-")
    session = config._lmspec_session = JudgeSession(  # type: ignore[attr-defined]
        options.from_pytest(config), Path(session_dir), xdist_worker=workerinput is not None
    )
    report.configure(config)
    if not config.option.collectonly and not (workerinput is None and getattr(config.option, "numprocesses", None)):
        session.start_early()  # a process that runs tests (not pytest-xdist's controller), before it imports torch
    if workerinput is not None:
        # Tiny tensors: intra-op threads in each xdist worker only contend for
        # the same cores (measured 30x slower small forwards under load).
        import torch

        torch.set_num_threads(1)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every judge process shares the session folder (fault registry)."""
    node.workerinput["lmspec_session_dir"] = str(session_of(node.config).session_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = getattr(config, "_lmspec_session", None)
    if session is not None and session.impl is not None:
        report.record_findings(config, session)
    if session is not None:
        session.close()
    if session is not None and getattr(config, "workerinput", None) is None:
        shutil.rmtree(session.session_dir, ignore_errors=True)  # made by this (main) judge process
    # Nothing the judge still holds is garbage it needs back: pytest's closing collections (two full
    # passes) and the interpreter's at exit leave it unscanned (0.3-0.6 s of each judge with torch).
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = session_of(config)
    target = session.target
    lines = [f"lmspec adapter: {target.given}" + (f" (root {target.root})" if target.root else "")]
    lines.append(f"lmspec profile: {target.profile} ({target.detected_by})")
    mode = "in-process (DEBUG)" if session.in_process else f"worker, sandbox {session.spec.sandbox}"
    lines.append(f"lmspec isolation: {mode}")
    lines.extend(f"lmspec WARNING: {w}" for w in session.warnings)
    lines.append(f"lmspec hypothesis profile: {settings.default!r}"[:200])
    env = {k: v for k, v in os.environ.items() if k.startswith("LMSPEC_")}
    if env:
        lines.append("lmspec env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    return lines


@pytest.fixture(scope="session", autouse=True)
def _dynamo_deferred() -> None:
    """The judge's own optimizers (a checkpoint's stand-in SGD) and its FLOP oracle (FlopCounterMode
    over torch's decompositions) would import torch._dynamo at their first call, as a submission's
    AdamW would (judge/worker/dynamo.py). A fixture, not pytest_configure: pytest-xdist's controller
    runs no test and imports no torch."""
    from lmspec.conformance.judge.worker import dynamo

    dynamo.defer()


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> "Implementation":
    """The implementation under test (its worker); fails every test that
    needs it when it cannot be loaded."""
    implementation = session_of(pytestconfig).implementation(lambda s: report.record_worker(pytestconfig, s))
    error = implementation.import_error
    if error is not None:
        where = f"{error.get('file')}:{error.get('line')}: " if error.get("file") else ""
        pytest.fail(
            f"the adapter failed to import: {where}{error.get('type')}: {error.get('message')}\n"
            f"--- traceback in the implementation ---\n{error.get('traceback', '')}",
            pytrace=False,
        )
    return implementation


def _make_fixture(function: profiles.Function):
    name = function.name

    @pytest.fixture(scope="session", name=name)
    def _fixture(impl: "Implementation"):
        from lmspec.conformance.judge.remote import RemoteFunction

        if not impl.has(name):
            pytest.skip(str(NotImplementedByAdapter(name, function.extended, said=impl.absent(name))))
        fn = RemoteFunction(impl, name)
        call = _skipping(fn)
        call.__name__ = call.__qualname__ = name
        call.__signature__ = fn.__signature__  # type: ignore[attr-defined]
        call.proxy = fn  # type: ignore[attr-defined]
        call.repeat = _skipping(fn.repeat)  # type: ignore[attr-defined]
        return call

    return _fixture


def _skipping(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, skipping the test where the adapter says the function is not implemented."""

    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            return method(*args, **kwargs)
        except NotImplementedByAdapter as exc:
            # pytest.skip raises a BaseException, which Hypothesis re-raises
            # at once instead of shrinking it as a failure.
            pytest.skip(str(exc))

    return call


#: One fixture per adapter function of every profile (names are unique across profiles).
for _function in (f for p in profiles.all_profiles() for f in p.functions):
    globals()[f"_fixture_{_function.name}"] = _make_fixture(_function)


# --- devices, dtypes, fixtures data -------------------------------------------
def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def available_devices(choice: str) -> list[str]:
    cuda = _cuda_available()
    if choice == "cpu":
        return ["cpu"]
    if choice == "cuda":
        return ["cuda"]
    return ["cpu", "cuda"] if (cuda or choice == "all") else ["cpu"]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """--max-examples on top of whichever profile Hypothesis' own plugin
    loaded; the shrink budget (Hypothesis documents this constant as the one
    to set: its default is five minutes a failure)."""
    examples = session.config.getoption("max_examples")
    if examples:
        settings.register_profile("_lmspec_override", parent=settings.default, max_examples=examples)
        settings.load_profile("_lmspec_override")
    from hypothesis.internal.conjecture import engine

    engine.MAX_SHRINKING_SECONDS = session.config.getoption("shrink_budget")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        # The official tests run on the CPU only: a test on cuda checks
        # behaviour beyond the course's contract, reported as STRICT.
        devices = available_devices(metafunc.config.getoption("device"))
        params = [pytest.param(d, marks=pytest.mark.strict) if d != "cpu" else d for d in devices]
        metafunc.parametrize("device", params, scope="session")


@pytest.fixture(autouse=True)
def _skip_unavailable_cuda(request: pytest.FixtureRequest) -> None:
    if "device" in request.fixturenames and request.getfixturevalue("device") == "cuda" and not _cuda_available():
        pytest.skip("cuda requested (--device) but torch.cuda.is_available() is False")


class _Fixtures:
    """``fixtures_dir / name``: the verified path of an official oracle file;
    a missing one skips the test (fails it when LMSPEC_REQUIRE_FIXTURES is
    set), a refused one (not the official bytes) fails it."""

    def __init__(self, files: FixtureSet):
        self.files = files

    def __truediv__(self, name: str) -> Path:
        __tracebackhide__ = True
        try:
            return self.files.path(name)
        except FixtureRefused as exc:
            pytest.fail(str(exc), pytrace=False)
        except FixtureMissing as exc:
            if os.environ.get("LMSPEC_REQUIRE_FIXTURES"):
                pytest.fail(f"{exc}; LMSPEC_REQUIRE_FIXTURES is set", pytrace=False)
            pytest.skip(f"{NOT_CHECKED_PREFIX} {exc}")
        raise AssertionError("unreachable")

    def has(self, name: str) -> bool:
        """Whether the official file ``name`` is at hand and verified (neither skips nor fails)."""
        try:
            self.files.path(name)
        except (FixtureMissing, FixtureRefused):
            return False
        return True


@pytest.fixture(scope="session")
def fixtures_dir(pytestconfig: pytest.Config) -> _Fixtures:
    """The official oracle files (conformance/fixtures.py: --fixtures,
    LMSPEC_FIXTURES, the graded repository's tests/fixtures, the cache, ../shared/fixtures)."""
    return _Fixtures(session_of(pytestconfig).fixtures)


@pytest.fixture(params=["float32", "bfloat16"], scope="session")
def float_dtype(request: pytest.FixtureRequest):
    """Parameter dtypes the spec allows for numeric modules (tolerances per dtype
    in conformance/tolerances.py)."""
    import torch

    return getattr(torch, request.param)


# --- selection, skips, xfails, listing ---------------------------------------
def _read_id_file(path: str) -> list[str]:
    entries = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(line)
    return entries


def spec_id(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("spec")
    return marker.args[0] if marker and marker.args else None


def strength(item: pytest.Item) -> str | None:
    """ "must" (scored), "strict" (reported, never scored) or "should" (a SHOULD
    item); None for a test without a spec id."""
    sid = spec_id(item)
    if sid is None:
        return None
    if item.get_closest_marker("strict") is not None:
        return "strict"
    return "should" if session_of(item.config).profile.item(sid).should else "must"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The test modules of other profiles are not even imported."""
    session = getattr(config, "_lmspec_session", None)
    if session is None or not collection_path.is_dir():
        return None
    own = {ROOT / "conformance" / t for t in session.profile.tests}
    others = {ROOT / "conformance" / t for p in profiles.all_profiles() for t in p.tests} - own
    return True if collection_path in others else None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = session_of(config).profile
    for item in items:
        sid = spec_id(item)
        if sid is not None and not profile.has_item(sid):
            raise pytest.UsageError(
                f"{item.nodeid}: spec id {sid!r} is not an item of profile {profile.name} "
                f"(conformance/profiles/{profile.name}.py)"
            )
    if config.getoption("spec"):
        selectors = profiles.selectors(config.getoption("spec"))
        for selector in selectors:
            if not any(profile.matches(i.id, [selector]) for i in profile.items):
                raise pytest.UsageError(
                    f"--spec {selector}: matches no spec item of profile {profile.name}; expected item ids or "
                    "their prefixes, comma-separated (every id: lmspec spec --list)"
                )
        keep, drop = [], []
        for item in items:
            sid = spec_id(item)
            (keep if sid is not None and profile.matches(sid, selectors) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
    for option, apply in (
        ("skips_file", lambda it, e: it.add_marker(pytest.mark.skip(reason=f"listed in --skips-file ({e})"))),
        (
            "xfails_file",
            lambda it, e: it.add_marker(pytest.mark.xfail(reason=f"listed in --xfails-file ({e})", strict=False)),
        ),
    ):
        path = config.getoption(option)
        if not path:
            continue
        for entry in _read_id_file(path):
            hits = [it for it in items if entry in it.nodeid]
            if not hits:
                warnings.warn(f"{option.replace('_', '-')} entry {entry!r} matches no test", stacklevel=1)
            for it in hits:
                apply(it, entry)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.config.getoption("list_spec"):
        return
    profile = session_of(session.config).profile
    by_item: dict[str, list[str]] = {item.id: [] for item in profile.items}
    for it in session.items:
        sid = spec_id(it)
        if sid:
            by_item[sid].append(it.nodeid + (" [STRICT]" if strength(it) == "strict" else ""))
    out = [f"profile {profile.name}: {profile.title}"]
    for item in profile.items:
        tag = " (extended)" if item.extended else ""
        out.append(f"{item.id:22s} {item.title}{tag} [{len(by_item[item.id])} tests]")
        out.extend(f"    {nodeid}" for nodeid in by_item[item.id])
    print("\n" + "\n".join(out))
    pytest.exit("listed spec items", returncode=0)


def pytest_runtest_setup(item: pytest.Item) -> None:
    sid = spec_id(item)
    if sid:
        item.user_properties.append(("spec", sid))
        item.user_properties.append(("strength", strength(item)))
    impl = session_of(item.config).impl
    if impl is not None:
        impl.begin_test(item.nodeid)
        if impl.channel is not None:
            item._lmspec_output_mark = impl.channel.output.total  # type: ignore[attr-defined]
