"""Meta-tests: the suite rejects broken implementations and accepts correct
variants; the tools work end to end.

The reference's tokenizer is not instrumented by its lazy type-check hook in
normal use (reference/__init__.py says why); here, in lmspec's own tests, it
is, before anything imports it.
"""

import sys

import pytest

from lmspec.reference import TYPECHECKED, CheckedImports

if TYPECHECKED and "lmspec.reference.tokenizer" not in sys.modules:
    sys.meta_path.insert(0, CheckedImports(("lmspec.reference.tokenizer",)))


# --- the fast suite and the full catalog (nox -s tests, nox -s meta) ------------------------------
#: Of the hostile catalogs, the cases the fast suite keeps (the rest are marked ``catalog``).
CATALOG_SAMPLE = {
    "test_hostile.py": {
        "test_reference_grades_clean",
        "test_delegating_to_the_reference_is_compromised",
        "test_environment_secrets_stay_out",
    },
    "test_hostile_host.py": {"test_adapters_file_linked_out_of_the_submission_is_its_error"},
}
#: Parametrised over a catalog (tests/mutants, tests/variants): the fast suite keeps tools.mutants.sample.
CATALOG_PARAMETRISED = {"test_mutants.py", "test_variants.py"}
#: End-to-end runs of 20 s to minutes each on 2 cores (a training, a smoke run, a benchmark, environments
#: built, a fresh clone, a batch killed mid-way, readers' whole-profile gradings): the full session runs
#: them with the catalog, the fast one does not (it keeps shorter gradings of the same paths: a reader
#: after chapter 4, a notebook's and demo code's intake, a fixture repository's layouts).
LONG_RUNS = {
    "test_smoke.py": {"test_smoke_run_end_to_end", "test_gpt2_smoke_run_end_to_end"},
    "test_intake.py": {
        "test_demo_code_and_missing_packages_never_end_a_grading",
        "test_a_notebook_and_a_chapter_folder_grade_as_the_same_code_in_one_file",
    },
    "test_gpt2_profile.py": {
        "test_reader_file_gets_full_marks",
        "test_adapter_file_of_renamed_names_gets_full_marks",
    },
    "test_bench.py": {"test_bench_quick_runs_end_to_end"},
    "test_fixtures_fetch.py": {"test_quick_start_grade_passes_from_the_cache_and_names_the_reference_by_its_path_here"},
    "test_watch.py": {"test_watch_regrades_an_edited_adapter_and_stops_on_ctrl_c"},
    "test_encdec.py": {"test_smoke_reverses_sequences"},
    "test_grade.py": {
        "test_fresh_clone_grades_a_repository_with_its_own_fixtures",
        "test_declared_dependency_needs_an_environment_of_its_own",
        "test_cs336_style_repository_grades_full_without_setup",
    },
    "test_batch.py": {"test_client_killed_mid_batch_then_rerun_grades_only_the_rest"},
    "test_host_paths.py": {
        "test_names_that_are_not_utf8_or_carry_escapes_are_written_escaped",
        "test_an_out_folder_inside_the_submission_is_empty_to_the_worker",
    },
}


@pytest.fixture(scope="session")
def judge_server():
    """A warm judge for this test process's many short gradings (every mutant, every variant):
    each grading forks it instead of starting Python, pytest and torch afresh
    (conformance/judge/forkserver.py; BENCHMARKS.md section 11)."""
    from lmspec.tools.mutants import meta_server

    server = meta_server()
    yield server
    server.close()


@pytest.fixture
def in_process(request) -> bool:
    """Whether a catalog case runs its adapter (lmspec's own) inside its judge: the full catalog does
    (``nox -s meta``, marked ``catalog``); the fast suite's sample goes through the sandboxed worker,
    as a submission does, so both ways stay tested (BENCHMARKS.md section 11)."""
    return request.node.get_closest_marker("catalog") is not None


@pytest.fixture(scope="session")
def shared_gradings(tmp_path_factory: pytest.TempPathFactory):
    """One folder for the gradings that several tests read (grader_run.grade_once), the same
    for every xdist worker of this run: each such grading runs once, whichever test asks first."""
    import os

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lmspec-shared-gradings"
    shared.mkdir(parents=True, exist_ok=True)
    return shared


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "catalog: one case of the full meta-test catalog (every mutant, variant and hostile submission) or "
        "a long end-to-end run: `nox -s meta` runs them; `nox -s tests` runs a small deterministic sample "
        "of the catalog and none of the long runs (tests/conftest.py)",
    )
    import os
    import shutil
    import tempfile

    # the user's cache of oracle files (lmspec fixtures fetch) is not the tests': each run starts with an empty one
    cache = tempfile.mkdtemp(prefix="lmspec-fixtures-cache-")
    os.environ["LMSPEC_FIXTURES_CACHE"] = cache
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
    from lmspec.conformance.judge.launch import die_with_parent

    die_with_parent()()  # a killed test run (its nox, its xdist controller) leaves no process running


def pytest_collection_modifyitems(config, items) -> None:
    from lmspec.tools.mutants import VARIANTS_DIR, discover, sample

    sampled = None
    for item in items:
        name = item.path.name
        if name in CATALOG_PARAMETRISED and hasattr(item, "callspec"):
            if sampled is None:
                sampled = {e.name for e in sample(discover()) + sample(discover(VARIANTS_DIR, "VARIANT"))}
            if item.callspec.id not in sampled:
                item.add_marker(pytest.mark.catalog)
        elif (name in CATALOG_SAMPLE and item.originalname not in CATALOG_SAMPLE[name]) or (
            item.originalname in LONG_RUNS.get(name, ())
        ):
            item.add_marker(pytest.mark.catalog)
    items.sort(key=_longest_first(items))


def _longest_first(items):
    """Sort key: the long runs first, then the files with tests marked ``slow`` or parametrised over a
    catalog, then the rest; past the long runs, each file's tests stay together and in their order
    (module-scoped fixtures are set up once). pytest-xdist hands tests out in this order, so the last ones
    are short and its workers finish together (the fast suite's last long test had left one of its 2
    workers idle for 36 s)."""
    heavy = {i.path for i in items if i.get_closest_marker("slow") or i.path.name in CATALOG_PARAMETRISED}
    return lambda i: 0 if i.originalname in LONG_RUNS.get(i.path.name, ()) else 1 if i.path in heavy else 2
