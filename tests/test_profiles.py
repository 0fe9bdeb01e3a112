"""The profile records, the target resolved once, and the options declared
once (conformance/profiles/, conformance/target.py, conformance/options.py)."""

import argparse
import json
from pathlib import Path

import pytest

from lmspec.conformance import options, profiles
from lmspec.conformance.profiles import FromScratch, Kind
from lmspec.conformance.target import Target, TargetError, resolve

REPO = Path(__file__).resolve().parent.parent
SPEC = (REPO / "docs" / "SPEC.md").read_text(encoding="utf-8")
PROFILES = profiles.all_profiles()


# --- the records ----------------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_record_is_consistent(profile: profiles.Profile) -> None:
    """Every item's rule is found in SPEC.md; its test folders exist; its
    reference is a module of lmspec's; one audit item."""
    for item in profile.items:
        assert any(line.startswith(item.anchor) for line in SPEC.splitlines()), (item.id, item.anchor)
        assert item.points >= 0 and (item.kind in (Kind.CORE, Kind.EXTENDED) or item.points == 0), item.id
    for test_path in profile.tests:
        assert (REPO / "conformance" / test_path).exists(), test_path
    assert profile.reference.startswith("lmspec.reference")
    assert sum(i.kind is Kind.AUDIT for i in profile.items) == 1


def test_function_and_item_names_are_unique_across_profiles() -> None:
    """Fixtures are named after functions, results key on item ids: neither may clash."""
    functions = [f.name for p in PROFILES for f in p.functions]
    items = [i.id for p in PROFILES for i in p.items]
    assert len(functions) == len(set(functions))
    assert len(items) == len(set(items))


def test_cs336_points_are_the_handouts() -> None:
    cs336 = profiles.get("cs336")
    assert sum(i.points for i in cs336.items if i.kind is Kind.CORE) == 62
    assert sum(i.points for i in cs336.items if i.kind is Kind.EXTENDED) == 10


def test_from_scratch_longest_pattern_decides() -> None:
    policy = FromScratch(
        forbidden=("torch.nn.*", "torch.nn.utils.clip_grad_norm_"), allowed=("torch.nn.Module", "torch.nn.utils.*")
    )
    assert policy.forbids("torch.nn.Linear")
    assert not policy.forbids("torch.nn.Module")
    assert not policy.forbids("torch.nn.utils.rnn.pad_sequence")
    assert policy.forbids("torch.nn.utils.clip_grad_norm_")
    assert not policy.forbids("torch.nn") and not policy.forbids("torch.tensor")


def test_cs336_from_scratch_list_is_spec_0() -> None:
    """SPEC §0: containers, Parameter, the Optimizer base and nn.init are allowed; the rest of
    torch.nn / functional / optim, clip_grad_norm_ and whole-item shortcuts are reported."""
    policy = profiles.get("cs336").from_scratch
    for allowed in (
        "torch.nn.Module",
        "torch.nn.ModuleList",
        "torch.nn.Parameter",
        "torch.nn.init.trunc_normal_",
        "torch.optim.Optimizer",
        "torch.nn.functional",
        "torch.einsum",
        "torch.nn.utils.parametrize",
    ):
        assert not policy.forbids(allowed), allowed
    for forbidden in (
        "torch.nn.Linear",
        "torch.nn.functional.silu",
        "torch.optim.AdamW",
        "torch.softmax",
        "torch.nn.utils.clip_grad_norm_",
        "torch._C._nn.gelu",
        "torch.Tensor.softmax",
        "torch.optim.lr_scheduler.CosineAnnealingLR",
    ):
        assert policy.forbids(forbidden), forbidden


def test_detect_picks_the_profile_whose_names_are_defined() -> None:
    assert profiles.detect(["run_linear", "get_tokenizer", "helper"]).name == "cs336"
    assert profiles.detect(["main", "helper"]) is None
    encdec = ["get_conventions", "run_attention", "run_encoder_layer", "run_greedy_decode", "helper"]
    assert profiles.detect(encdec).name == "encdec"


# --- the target -------------------------------------------------------------------------------
def test_no_target_is_the_reference() -> None:
    target = resolve(None)
    assert target.is_reference and target.profile == profiles.DEFAULT and target.root is None
    assert target.adapter == profiles.get(profiles.DEFAULT).reference


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("/no/such/place", "no such file or folder"),
        ("README.md", "not a Python file"),
        ("no_such_module_anywhere", "not a file, a folder or an importable module"),
    ],
)
def test_what_is_not_a_submission_is_refused(given: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(TargetError, match=message):
        resolve(given)


def test_a_folder_without_an_adapter_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.py").write_text("x = 1\n")
    with pytest.raises(TargetError, match="without an adapters file"):
        resolve(str(tmp_path))


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(TargetError, match="unknown profile"):
        resolve(None, "nope")


def test_a_repository_resolves_to_its_adapter_and_profile(tmp_path: Path) -> None:
    repo = tmp_path / "alice-cs336"
    (repo / "tests").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (repo / "tests" / "adapters.py").write_text("def run_linear(d_in, d_out, weights, in_features):\n    pass\n")
    target = resolve(str(repo))
    assert target.adapter == str(repo / "tests" / "adapters.py") and target.root == repo
    assert (target.name, target.profile, target.detected_by) == ("alice-cs336", "cs336", "names")
    again = Target.from_json(json.loads(json.dumps(target.to_json())))
    assert again == target


def test_a_star_import_asks_the_worker(tmp_path: Path) -> None:
    (tmp_path / "adapters.py").write_text("from mine import *\n")
    assert resolve(str(tmp_path / "adapters.py")).detected_by == "star-import"
    assert resolve(str(tmp_path / "adapters.py"), "cs336").detected_by == "given"


# --- the options ------------------------------------------------------------------------------
def test_each_option_is_declared_once() -> None:
    dests = [o.dest for o in options.OPTIONS]
    flags = [f for o in options.OPTIONS for f in o.flags]
    assert len(dests) == len(set(dests)) and len(flags) == len(set(flags))


def test_the_judge_receives_what_the_grader_was_given() -> None:
    """Settings passed on as arguments parse back to the same values on the plugin's side."""
    settings = options.Settings(
        spec="2.rope",
        sandbox="none",
        timeout_per_call=7.5,
        memory_limit=3.0,
        allow_reference=True,
        python="/usr/bin/python3",
        fixtures="/tmp/fx",
        device="cpu",
        profile="cs336",
        startup_timeout=30.0,
    )
    parser = argparse.ArgumentParser()
    for o in options.options(options.SUITE):
        flags = [f for f in o.flags if f != "--fixtures"]
        if o.flag:
            parser.add_argument(*flags, dest=o.dest, action="store_true", default=o.default)
        else:
            parser.add_argument(*flags, dest=o.dest, type=o.type, default=o.default)
    parsed = parser.parse_args(options.judge_arguments(settings))
    for o in options.OPTIONS:
        if o.judge:
            assert getattr(parsed, o.dest) == getattr(settings, o.dest), o.dest


def test_grader_parser_has_every_grader_option() -> None:
    from lmspec.tools.grade.cli import build_parser

    parsed = build_parser().parse_args([])
    for o in options.options(options.GRADE):
        assert getattr(parsed, o.dest) == o.initial(), o.dest
