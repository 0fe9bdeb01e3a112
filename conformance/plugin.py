"""pytest plugin: the judge. Selects the implementation under test, starts
its worker (sandboxed), hands tests proxies of its adapter functions as
fixtures, and adds the suite's options and reports.

Options (README "Running the suite directly"):
  --adapter PATH_OR_MODULE   implementation under test (env LMSPEC_ADAPTER;
                             default: the reference)
  --sandbox auto|bwrap|none  how the worker is isolated (default auto:
                             bubblewrap when it works, else none with a warning)
  --in-process               DEBUG ONLY, never for grading: the implementation
                             runs inside this pytest process (pdb works)
  --timeout-per-call S       a call without an answer after S seconds kills the
                             worker; that function is not called again (60)
  --memory-limit GB          address-space limit of the worker (4; 0 = none)
  --python PATH              the worker's interpreter (default: this one)
  --fixtures-dir DIR         the official oracle files (conformance/fixtures.py
                             says where they are looked for otherwise)
  --spec IDS                 only tests of these spec ids (comma separated,
                             prefix match on dots: "2" = all of section 2)
  --device cpu|cuda|all|auto devices for numeric tests (default auto)
  --max-examples N           Hypothesis examples per property test
  --xfails-file / --skips-file  test-id substrings, one a line, # comments
  --list-spec                print every spec item with its tests, then exit
  --lmspec-report PATH       per-test JSON (conformance/report.py)
  --lmspec-progress PATH     one JSON line per finished test, as they finish
Hypothesis profiles: dev (default), ci (default when CI is set), thorough.
"""

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from lmspec.conformance import report
from lmspec.conformance.adapter import (
    CORE_FUNCTIONS,
    DEFAULT_ADAPTER,
    EXTENDED_FUNCTIONS,
    NotImplementedByAdapter,
    looks_like_path,
    submission_root,
)
from lmspec.conformance.fixtures import FixtureMissing, FixtureRefused, FixtureSet, default_sources
from lmspec.conformance.proxy import Implementation
from lmspec.conformance.sandbox import Sandbox, WorkerSpec, resolve
from lmspec.conformance.spec_items import BY_ID, ITEMS, matches

# --- Hypothesis profiles ----------------------------------------------------
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
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
settings.register_profile("thorough", max_examples=400, phases=list(Phase), **_common)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("lmspec", "lmspec conformance suite")
    g.addoption("--adapter", default=None, help="adapter module path or import name (env LMSPEC_ADAPTER)")
    g.addoption("--sandbox", default=os.environ.get("LMSPEC_SANDBOX", "auto"), choices=[s.value for s in Sandbox])
    g.addoption("--in-process", action="store_true", help="DEBUG ONLY: run the implementation in this process")
    g.addoption("--timeout-per-call", type=float, default=60.0, help="seconds a call may take (60)")
    g.addoption("--startup-timeout", type=float, default=120.0, help="seconds importing the adapter may take (120)")
    g.addoption("--memory-limit", type=float, default=4.0, help="worker address space in GB (4; 0: none)")
    g.addoption("--allow-reference", action="store_true", help="lmspec's own meta-test adapters: reference visible")
    g.addoption("--python", default=None, help="interpreter of the worker (default: this one)")
    g.addoption("--fixtures-dir", default=None, help="folder with the official CS336 fixture files")
    g.addoption("--spec", default=None, help="comma-separated spec ids to run (prefix match)")
    g.addoption(
        "--device",
        default=os.environ.get("LMSPEC_DEVICE", "auto"),
        choices=["auto", "cpu", "cuda", "all"],
    )
    g.addoption("--max-examples", type=int, default=None, help="Hypothesis max_examples override")
    g.addoption(
        "--shrink-budget",
        type=float,
        default=10.0,
        help="seconds Hypothesis may spend shrinking one failure (10): past it, the failure is shown "
        "as far as it got, and the report says so",
    )
    g.addoption("--xfails-file", default=None, help="file of test-id substrings to mark xfail")
    g.addoption("--skips-file", default=None, help="file of test-id substrings to skip")
    g.addoption("--list-spec", action="store_true", help="list spec items with their tests and exit")
    g.addoption("--lmspec-report", default=None, help="write a per-test JSON report to this path")
    g.addoption("--lmspec-progress", default=None, help="append one JSON line per finished test (the grader's bar)")


# --- the implementation under test ----------------------------------------------
class _Target:
    """What --adapter names, resolved once per judge process."""

    def __init__(self, config: pytest.Config):
        target = config.getoption("adapter") or os.environ.get("LMSPEC_ADAPTER") or DEFAULT_ADAPTER
        self.label = target
        self.is_reference = target == DEFAULT_ADAPTER
        if looks_like_path(target):
            path = Path(target).expanduser().resolve()
            self.adapter, self.root = str(path), submission_root(path)
        else:
            self.adapter, self.root = target, None
        sandbox, warning = resolve(config.getoption("sandbox"))
        self.in_process = bool(config.getoption("in_process"))
        self.warnings = [warning] if warning and not self.in_process else []
        if self.in_process:
            self.warnings.append("--in-process: the implementation ran INSIDE the judge (debugging only, not grading)")
        memory = config.getoption("memory_limit") or None
        threads = 1 if hasattr(config, "workerinput") or os.cpu_count() == 1 else 2
        cuda = config.getoption("device") in ("cuda", "all", "auto") and _cuda_available()
        self.spec = WorkerSpec(
            adapter=self.adapter,
            root=self.root,
            python=config.getoption("python") or sys.executable,
            sandbox=sandbox,
            memory_gb=memory,
            threads=threads,
            cuda=cuda,
            allow_reference=bool(config.getoption("allow_reference")) or self.is_reference,
        )
        workerinput = getattr(config, "workerinput", None)
        self.session_dir = Path(workerinput["lmspec_session_dir"] if workerinput else config._lmspec_session_dir)
        self.impl: Implementation | None = None
        self.start_error: BaseException | None = None

    def implementation(self, config: pytest.Config) -> Implementation:
        if self.impl is None and self.start_error is None:
            try:
                self.impl = Implementation(
                    self.spec,
                    in_process=self.in_process,
                    call_timeout=config.getoption("timeout_per_call"),
                    startup_timeout=config.getoption("startup_timeout"),
                    session_dir=self.session_dir,
                    warnings=tuple(self.warnings),
                )
            except BaseException as exc:
                self.start_error = exc
            report.record_worker(config, self)
        if self.start_error is not None:
            raise self.start_error
        assert self.impl is not None
        return self.impl


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spec(id): the SPEC.md item a test checks (conformance/spec_items.py)")
    config.addinivalue_line("markers", "slow: a test that takes seconds even in the ci profile")
    config.addinivalue_line(
        "markers",
        "strict: a STRICT rule of its spec item (SPEC.md: behaviour beyond the course's contract; "
        "reported per item, never scored)",
    )
    if hasattr(config, "workerinput"):
        # Tiny tensors: intra-op threads in each xdist worker only contend for
        # the same cores (measured 30x slower small forwards under load).
        import torch

        torch.set_num_threads(1)
    else:
        config._lmspec_session_dir = tempfile.mkdtemp(prefix="lmspec-session-")  # type: ignore[attr-defined]
    config._lmspec_target = _Target(config)  # type: ignore[attr-defined]
    config._lmspec_fixtures = FixtureSet(  # type: ignore[attr-defined]
        default_sources(config.getoption("fixtures_dir"), config._lmspec_target.root, REPO_ROOT)  # type: ignore[attr-defined]
    )
    report.configure(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every judge process shares the session folder (fault registry)."""
    node.workerinput["lmspec_session_dir"] = node.config._lmspec_session_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    target = getattr(config, "_lmspec_target", None)
    if target is not None and target.impl is not None:
        report.record_findings(config, target)
        target.impl.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    target: _Target = config._lmspec_target  # type: ignore[attr-defined]
    lines = [f"lmspec adapter: {target.label}" + (f" (root {target.root})" if target.root else "")]
    mode = "in-process (DEBUG)" if target.in_process else f"worker, sandbox {target.spec.sandbox}"
    lines.append(f"lmspec isolation: {mode}")
    lines.extend(f"lmspec WARNING: {w}" for w in target.warnings)
    lines.append(f"lmspec hypothesis profile: {settings.default!r}"[:200])
    env = {k: v for k, v in os.environ.items() if k.startswith("LMSPEC_")}
    if env:
        lines.append("lmspec env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    return lines


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> Implementation:
    """The implementation under test (its worker); fails every test that
    needs it when it cannot be loaded."""
    target: _Target = pytestconfig._lmspec_target  # type: ignore[attr-defined]
    implementation = target.implementation(pytestconfig)
    error = implementation.import_error
    if error is not None:
        where = f"{error.get('file')}:{error.get('line')}: " if error.get("file") else ""
        pytest.fail(
            f"the adapter failed to import: {where}{error.get('type')}: {error.get('message')}\n"
            f"--- traceback in the implementation ---\n{error.get('traceback', '')}",
            pytrace=False,
        )
    return implementation


def _make_fixture(name: str):
    @pytest.fixture(scope="session", name=name)
    def _fixture(impl: Implementation):
        if not impl.has(name):
            pytest.skip(str(NotImplementedByAdapter(name)))
        fn = impl.function(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            try:
                return fn(*args, **kwargs)
            except NotImplementedByAdapter as exc:
                # pytest.skip raises a BaseException, which Hypothesis re-raises
                # at once instead of shrinking it as a failure.
                pytest.skip(str(NotImplementedByAdapter(name, detail=str(exc).partition("(")[2].rstrip(")"))))

        call.__name__ = call.__qualname__ = name
        call.__signature__ = fn.__signature__  # type: ignore[attr-defined]
        call.proxy = fn  # type: ignore[attr-defined]
        return call

    return _fixture


for _name in CORE_FUNCTIONS + EXTENDED_FUNCTIONS:
    globals()[f"_fixture_{_name}"] = _make_fixture(_name)


# --- devices, dtypes, fixtures data -------------------------------------------
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
            pytest.skip(str(exc))
        raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def fixtures_dir(pytestconfig: pytest.Config) -> _Fixtures:
    """The official oracle files (conformance/fixtures.py: --fixtures,
    LMSPEC_FIXTURES, the graded repository's tests/fixtures, ../shared/fixtures)."""
    return _Fixtures(pytestconfig._lmspec_fixtures)  # type: ignore[attr-defined]


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
    return "should" if BY_ID[sid].should else "must"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        sid = spec_id(item)
        if sid is not None and sid not in BY_ID:
            raise pytest.UsageError(f"{item.nodeid}: unknown spec id {sid!r} (see conformance/spec_items.py)")
    if config.getoption("spec"):
        selectors = [s.strip() for s in config.getoption("spec").split(",") if s.strip()]
        keep, drop = [], []
        for item in items:
            sid = spec_id(item)
            (keep if sid is not None and matches(sid, selectors) else drop).append(item)
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
    by_item: dict[str, list[str]] = {item.id: [] for item in ITEMS}
    for it in session.items:
        sid = spec_id(it)
        if sid:
            by_item[sid].append(it.nodeid + (" [STRICT]" if strength(it) == "strict" else ""))
    out = []
    for item in ITEMS:
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
    target = getattr(item.config, "_lmspec_target", None)
    if target is not None and target.impl is not None:
        target.impl.begin_test(item.nodeid)
        if target.impl.channel is not None:
            item._lmspec_output_mark = target.impl.channel.output.total  # type: ignore[attr-defined]
