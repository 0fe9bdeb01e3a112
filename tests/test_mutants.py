"""Every mutant (one realistic bug each) must be rejected by the suite: by a
scored MUST test, or, for a bug the course's contract does not cover, by an
unscored test (a STRICT rule, a SHOULD item) with the reason in the mutant's
header."""

import pytest

from lmspec.tools.mutants import discover, run_one, undeclared_causes

MUTANTS = discover()


def test_catalog_is_large_and_spread():
    """At least 40 mutants, covering every section of the spec."""
    assert len(MUTANTS) >= 40, f"only {len(MUTANTS)} mutants"
    sections = {m.meta["spec"].split(".")[0] for m in MUTANTS}
    assert sections >= {"1", "2", "3", "4"}, sections


def test_gpt2_catalog_covers_every_core_item():
    """The gpt2 profile: at least 30 mutants, every core item of its record with one."""
    from lmspec.conformance.profiles import Kind, get

    gpt2 = [m for m in MUTANTS if m.meta.get("profile") == "gpt2"]
    assert len(gpt2) >= 30, f"only {len(gpt2)} gpt2 mutants"
    core = {i.id for i in get("gpt2").items if i.kind is Kind.CORE}
    assert core <= {m.meta["spec"] for m in gpt2}, core - {m.meta["spec"] for m in gpt2}


def test_encdec_catalog_covers_every_core_item():
    """The encdec profile: at least 25 mutants, every core item of its record with one."""
    from lmspec.conformance.profiles import Kind, get

    encdec = [m for m in MUTANTS if m.meta.get("profile") == "encdec"]
    assert len(encdec) >= 25, f"only {len(encdec)} encdec mutants"
    core = {i.id for i in get("encdec").items if i.kind is Kind.CORE}
    assert core <= {m.meta["spec"] for m in encdec}, core - {m.meta["spec"] for m in encdec}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_suite_kills_mutant(mutant, judge_server, in_process):
    outcome = run_one(mutant, judge_server, in_process)
    if outcome.strict_only:
        assert mutant.meta.get("strict_only"), (
            f"mutant {mutant.name} ({mutant.meta['bug']}) is caught only by unscored tests: the score misses it. "
            f"Either a MUST test should catch it, or its header must say why the course's contract does not "
            f"cover it ('strict_only'): {outcome.detail}"
        )
    else:
        assert outcome.killed, f"mutant {mutant.name} survived ({mutant.meta['bug']}): {outcome.detail}"
    if "hinted" in mutant.meta:  # the right cause, replayed and confirmed on a second input, is named
        missing = [h for h in mutant.meta["hinted"] if not any(h in t for t in outcome.failures)]
        assert not missing, f"mutant {mutant.name}: no failure names its cause {missing}: {outcome.detail}"
    if "never_hinted" in mutant.meta:  # a hint whose bug this is not must stay silent
        named = [h for h in mutant.meta["never_hinted"] for t in outcome.failures if h in t]
        assert not named, f"mutant {mutant.name} was told a wrong likely cause: {named}"
    wrong = undeclared_causes(mutant, outcome)  # a wrong cause is worse than none
    assert not wrong, (
        f"mutant {mutant.name} ({mutant.meta['bug']}) was told causes its header does not declare right "
        f"('hinted', or 'also_named' for a bug that gives the same outputs): {wrong}"
    )
    if "costs" in mutant.meta:  # one bug, one item
        assert outcome.must_items == set(mutant.meta["costs"]), (
            f"mutant {mutant.name} ({mutant.meta['bug']}) must cost exactly {sorted(mutant.meta['costs'])}, "
            f"it fails MUST tests of {sorted(outcome.must_items)}"
        )
