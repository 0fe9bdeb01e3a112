"""pytest plugin: selects the implementation under test, exposes its adapter
functions as fixtures, and adds the suite's options and reports.

Options (see README "Running the suite"):
  --adapter PATH_OR_MODULE   implementation under test (env LMSPEC_ADAPTER;
                             default: the reference)
  --spec IDS                 only tests of these spec ids (comma separated,
                             prefix match on dots: "2" = all of section 2)
  --device cpu|cuda|all|auto devices for numeric tests (default auto: cpu,
                             plus cuda when available)
  --max-examples N           Hypothesis examples per property test
  --xfails-file / --skips-file  test-id substrings, one a line, # comments
  --list-spec                print every spec item with its tests, then exit
  --lmspec-report PATH       per-test JSON (spec id, outcome, message)
Hypothesis profiles: dev (default), ci (default when CI is set), thorough;
pick one with --hypothesis-profile.
"""

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from conformance import integrity
from conformance.adapter import (
    CORE_FUNCTIONS,
    EXTENDED_FUNCTIONS,
    Adapter,
    NotImplementedByAdapter,
    load_adapter,
)
from conformance.spec_items import BY_ID, ITEMS, matches

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
_ADAPTER: Adapter | None = None
_ADAPTER_ERROR: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("lmspec", "lmspec conformance suite")
    g.addoption("--adapter", default=None, help="adapter module path or import name (env LMSPEC_ADAPTER)")
    g.addoption("--spec", default=None, help="comma-separated spec ids to run (prefix match)")
    g.addoption(
        "--device",
        default=os.environ.get("LMSPEC_DEVICE", "auto"),
        choices=["auto", "cpu", "cuda", "all"],
    )
    g.addoption("--max-examples", type=int, default=None, help="Hypothesis max_examples override")
    g.addoption("--xfails-file", default=None, help="file of test-id substrings to mark xfail")
    g.addoption("--skips-file", default=None, help="file of test-id substrings to skip")
    g.addoption("--list-spec", action="store_true", help="list spec items with their tests and exit")
    g.addoption("--lmspec-report", default=None, help="write a per-test JSON report to this path")


def pytest_configure(config: pytest.Config) -> None:
    global _ADAPTER, _ADAPTER_ERROR
    config.addinivalue_line("markers", "spec(id): the SPEC.md item a test checks (conformance/spec_items.py)")
    config.addinivalue_line("markers", "slow: a test that takes seconds even in the ci profile")
    config.addinivalue_line(
        "markers",
        "strict: a STRICT rule of its spec item (SPEC.md: behaviour beyond the course's contract; "
        "reported per item, never scored)",
    )
    if config.getoption("max_examples"):
        settings.register_profile(
            "_lmspec_override",
            parent=settings.default,
            max_examples=config.getoption("max_examples"),
        )
        settings.load_profile("_lmspec_override")
    if hasattr(config, "workerinput"):
        # Tiny tensors: intra-op threads in each xdist worker only contend for
        # the same cores (measured 30x slower small forwards under load).
        import torch

        torch.set_num_threads(1)
    spec = config.getoption("adapter") or os.environ.get("LMSPEC_ADAPTER")
    integrity.snapshot(config)  # before the adapter import: see conformance/integrity.py
    try:
        _ADAPTER = load_adapter(spec)
    except Exception as exc:  # the submission's import error, reported per test
        _ADAPTER_ERROR = f"adapter {spec or 'reference.adapter'!r} failed to import: {type(exc).__name__}: {exc}"
    integrity.after_adapter_import(config)
    config._lmspec_results = []  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    if _ADAPTER is not None:
        lines.append(f"lmspec adapter: {_ADAPTER.spec} ({_ADAPTER.origin})")
        core = len(CORE_FUNCTIONS) - len(_ADAPTER.missing_core)
        ext = len(EXTENDED_FUNCTIONS) - len(_ADAPTER.missing_extended)
        lines.append(f"lmspec functions: core {core}/{len(CORE_FUNCTIONS)}, extended {ext}/{len(EXTENDED_FUNCTIONS)}")
        if _ADAPTER.missing_core:
            lines.append(f"lmspec missing core: {', '.join(_ADAPTER.missing_core)}")
    else:
        lines.append(f"lmspec adapter: ERROR {_ADAPTER_ERROR}")
    lines.append(f"lmspec hypothesis profile: {settings.default!r}"[:200])
    env = {k: v for k, v in os.environ.items() if k.startswith("LMSPEC_")}
    if env:
        lines.append("lmspec env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    return lines


# --- adapter functions as fixtures ------------------------------------------
def get_adapter() -> Adapter:
    if _ADAPTER is None:
        pytest.fail(_ADAPTER_ERROR or "no adapter loaded", pytrace=False)
    return _ADAPTER


def _make_fixture(name: str):
    @pytest.fixture(scope="session", name=name)
    def _fixture():
        try:
            fn = get_adapter().get(name)
        except NotImplementedByAdapter as exc:
            pytest.skip(str(exc))

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except NotImplementedByAdapter as exc:
                # pytest.skip raises a BaseException, which Hypothesis re-raises
                # at once instead of shrinking it as a failure.
                pytest.skip(str(exc))

        call.__name__ = call.__qualname__ = name
        call.__wrapped__ = fn  # type: ignore[attr-defined]
        return call

    return _fixture


for _name in CORE_FUNCTIONS + EXTENDED_FUNCTIONS:
    globals()[f"_fixture_{_name}"] = _make_fixture(_name)


# --- devices, dtypes, fixtures data -------------------------------------------
def available_devices(choice: str) -> list[str]:
    import torch

    cuda = torch.cuda.is_available()
    if choice == "cpu":
        return ["cpu"]
    if choice == "cuda":
        return ["cuda"]
    return ["cpu", "cuda"] if (cuda or choice == "all") else ["cpu"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", available_devices(metafunc.config.getoption("device")), scope="session")


@pytest.fixture(autouse=True)
def _skip_unavailable_cuda(request: pytest.FixtureRequest) -> None:
    if "device" in request.fixturenames and request.getfixturevalue("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("cuda requested (--device) but torch.cuda.is_available() is False")


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """shared/fixtures (env LMSPEC_FIXTURES, default ../shared/fixtures)."""
    path = Path(os.environ.get("LMSPEC_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))
    if not (path / "corpus.en").is_file():
        reason = f"oracle fixtures not found at {path} (set LMSPEC_FIXTURES to shared/fixtures)"
        if os.environ.get("LMSPEC_REQUIRE_FIXTURES"):
            pytest.fail(reason + "; LMSPEC_REQUIRE_FIXTURES is set", pytrace=False)
        pytest.skip(reason)
    return path


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
        (
            "skips_file",
            lambda it, e: it.add_marker(pytest.mark.skip(reason=f"listed in --skips-file ({e})")),
        ),
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
            by_item[sid].append(it.nodeid)
    out = []
    for item in ITEMS:
        tag = " (extended)" if item.extended else ""
        out.append(f"{item.id:22s} {item.title}{tag} [{len(by_item[item.id])} tests]")
        out.extend(f"    {nodeid}" for nodeid in by_item[item.id])
    print("\n" + "\n".join(out))
    pytest.exit("listed spec items", returncode=0)


# --- per-test JSON report ------------------------------------------------------
def _one_line(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text.strip().splitlines()[0][:500] if text.strip() else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    config = getattr(pytest_runtest_logreport, "_config", None)
    if config is None:
        return
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if report.when != "call" and report.outcome == "failed":
            outcome = "error"
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        config._lmspec_results.append(
            {
                "nodeid": report.nodeid,
                "spec": dict(report.user_properties).get("spec"),
                "strength": dict(report.user_properties).get("strength"),
                "when": report.when,
                "outcome": outcome,
                "message": _one_line(report),
                "duration_s": round(report.duration, 4),
            }
        )


def pytest_sessionstart(session: pytest.Session) -> None:
    pytest_runtest_logreport._config = session.config  # type: ignore[attr-defined]
    session.config._lmspec_started = time.time()  # type: ignore[attr-defined]


def strength(item: pytest.Item) -> str | None:
    """"must" (scored), "strict" (reported, never scored) or "should" (a SHOULD
    item); None for a test without a spec id."""
    sid = spec_id(item)
    if sid is None:
        return None
    if item.get_closest_marker("strict") is not None:
        return "strict"
    return "should" if BY_ID[sid].should else "must"


def pytest_runtest_setup(item: pytest.Item) -> None:
    sid = spec_id(item)
    if sid:
        item.user_properties.append(("spec", sid))
        item.user_properties.append(("strength", strength(item)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = session.config.getoption("lmspec_report")
    if not path or hasattr(session.config, "workerinput"):
        return
    payload: dict[str, Any] = {
        "adapter": _ADAPTER.spec if _ADAPTER else None,
        "adapter_origin": _ADAPTER.origin if _ADAPTER else None,
        "adapter_error": _ADAPTER_ERROR,
        "missing_core": _ADAPTER.missing_core if _ADAPTER else list(CORE_FUNCTIONS),
        "missing_extended": _ADAPTER.missing_extended if _ADAPTER else list(EXTENDED_FUNCTIONS),
        "exitstatus": int(exitstatus),
        "duration_s": round(time.time() - session.config._lmspec_started, 3),  # type: ignore[attr-defined]
        "python": sys.version.split()[0],
        "tests": session.config._lmspec_results,  # type: ignore[attr-defined]
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1))


@pytest.fixture(params=["float32", "bfloat16"], scope="session")
def float_dtype(request: pytest.FixtureRequest):
    """Parameter dtypes the spec allows for numeric modules (tolerances per dtype
    in conformance/tolerances.py)."""
    import torch

    return getattr(torch, request.param)
