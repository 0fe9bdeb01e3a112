"""Meta-tests: the suite rejects broken implementations and accepts correct
variants; the tools work end to end.

The reference's tokenizer is not instrumented by its lazy type-check hook in
normal use (reference/__init__.py says why); here, in lmspec's own tests, it
is, before anything imports it.
"""

import sys

from lmspec.reference import TYPECHECKED

if TYPECHECKED and "lmspec.reference.tokenizer" not in sys.modules:
    from jaxtyping import install_import_hook

    install_import_hook("lmspec.reference.tokenizer", "beartype.beartype")


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


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "catalog: one case of the full meta-test catalog (every mutant, variant and hostile submission): "
        "`nox -s meta` runs them; `nox -s tests` runs a small deterministic sample (tests/conftest.py)",
    )
    from lmspec.conformance.judge.launch import die_with_parent

    die_with_parent()()  # a killed test run (its nox, its xdist controller) leaves no process running


def pytest_collection_modifyitems(config, items) -> None:
    import pytest

    from lmspec.tools.mutants import VARIANTS_DIR, discover, sample

    sampled = None
    for item in items:
        name = item.path.name
        if name in CATALOG_PARAMETRISED and hasattr(item, "callspec"):
            if sampled is None:
                sampled = {e.name for e in sample(discover()) + sample(discover(VARIANTS_DIR, "VARIANT"))}
            if item.callspec.id not in sampled:
                item.add_marker(pytest.mark.catalog)
        elif name in CATALOG_SAMPLE and item.originalname not in CATALOG_SAMPLE[name]:
            item.add_marker(pytest.mark.catalog)
