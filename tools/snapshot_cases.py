"""The golden snapshot cases and what regenerates and verifies them (the
`lmspec snapshots` command is tools/snapshots.py, which imports this module
only when it runs, so that its --help does not import torch)."""

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from lmspec.conformance import tolerances as T
from lmspec.conformance.asserts import describe_mismatch
from lmspec.conformance.cs336.oracles import nn as O
from lmspec.conformance.gpt2 import oracles as G
from lmspec.conformance.snapshot_io import MANIFEST, ROOT, npz_bytes, pack, read_manifest, sha256, unpack


class Case(NamedTuple):
    spec: str  # spec id the golden belongs to
    function: str  # adapter function
    seed: int
    build: Callable[[torch.Generator], dict[str, Any]]  # adapter kwargs
    oracle: Callable[[dict[str, Any]], torch.Tensor]  # float64 expectation
    tol: str  # name of the op's float32-vs-float64 bound in conformance/tolerances.py
    profile: str = "cs336"  # whose adapters: cs336 (reference/adapter), gpt2 (the binder over reference/gpt2)


def rel(name: str) -> str:
    """The golden's path under snapshots/: ``nn/<name>.npz`` for the cs336
    cases, ``<name>.npz`` for the others (named ``gpt2/<op>``)."""
    return f"{name}.npz" if "/" in name else f"nn/{name}.npz"


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def _block_weights(g: torch.Generator, d_model: int, d_ff: int, prefix: str = "") -> dict[str, torch.Tensor]:
    w = {f"{prefix}attn.{n}_proj.weight": _randn(g, d_model, d_model, scale=d_model**-0.5) for n in "qkv"}
    w[f"{prefix}attn.output_proj.weight"] = _randn(g, d_model, d_model, scale=d_model**-0.5)
    w[f"{prefix}ffn.w1.weight"] = _randn(g, d_ff, d_model, scale=d_model**-0.5)
    w[f"{prefix}ffn.w3.weight"] = _randn(g, d_ff, d_model, scale=d_model**-0.5)
    w[f"{prefix}ffn.w2.weight"] = _randn(g, d_model, d_ff, scale=d_ff**-0.5)
    w[f"{prefix}ln1.weight"] = 1 + 0.1 * _randn(g, d_model)
    w[f"{prefix}ln2.weight"] = 1 + 0.1 * _randn(g, d_model)
    return w


def _lm_weights(g: torch.Generator) -> dict[str, torch.Tensor]:
    w = {"token_embeddings.weight": _randn(g, 64, 16)}
    for i in range(2):
        w.update(_block_weights(g, 16, 48, f"layers.{i}."))
    w["ln_final.weight"] = 1 + 0.1 * _randn(g, 16)
    w["lm_head.weight"] = _randn(g, 64, 16, scale=0.25)
    return w


_LM_CFG = O.ModelConfig(vocab_size=64, context_length=12, d_model=16, num_layers=2, num_heads=4, d_ff=48)


def _sdpa_mask(g: torch.Generator) -> torch.Tensor:
    mask = torch.rand(2, 5, 7, generator=g) < 0.6
    mask[..., 0] = True  # every query sees at least one key
    return mask


CASES: dict[str, Case] = {
    "linear": Case(
        "2.linear",
        "run_linear",
        1,
        lambda g: dict(d_in=12, d_out=7, weights=_randn(g, 7, 12), in_features=_randn(g, 2, 3, 12)),
        lambda a: O.linear(a["in_features"], a["weights"]),
        "LINEAR_F32",
    ),
    "embedding": Case(
        "2.embedding",
        "run_embedding",
        2,
        lambda g: dict(
            vocab_size=30,
            d_model=8,
            weights=_randn(g, 30, 8),
            token_ids=torch.randint(0, 30, (2, 9), generator=g),
        ),
        lambda a: O.embedding(a["weights"], a["token_ids"]),
        "EXACT",
    ),
    "rmsnorm": Case(
        "2.rmsnorm",
        "run_rmsnorm",
        3,
        lambda g: dict(
            d_model=16,
            eps=1e-5,
            weights=1 + 0.1 * _randn(g, 16),
            in_features=_randn(g, 2, 5, 16, scale=3.0),
        ),
        lambda a: O.rmsnorm(a["in_features"], a["weights"], a["eps"]),
        "RMSNORM_F32",
    ),
    "swiglu": Case(
        "2.swiglu",
        "run_swiglu",
        4,
        lambda g: dict(
            d_model=16,
            d_ff=48,
            w1_weight=_randn(g, 48, 16, scale=0.25),
            w2_weight=_randn(g, 16, 48, scale=0.15),
            w3_weight=_randn(g, 48, 16, scale=0.25),
            in_features=_randn(g, 2, 5, 16),
        ),
        lambda a: O.swiglu(a["in_features"], a["w1_weight"], a["w2_weight"], a["w3_weight"]),
        "SWIGLU_F32",
    ),
    "rope": Case(
        "2.rope",
        "run_rope",
        5,
        lambda g: dict(
            d_k=16,
            theta=10000.0,
            max_seq_len=64,
            in_query_or_key=_randn(g, 2, 6, 16),
            token_positions=torch.tensor([[0, 1, 2, 3, 4, 5], [7, 3, 63, 0, 12, 40]]),
        ),
        lambda a: O.rope(a["in_query_or_key"], a["token_positions"], a["theta"]),
        "ROPE_F32",
    ),
    "softmax": Case(
        "2.softmax",
        "run_softmax",
        6,
        lambda g: dict(in_features=_randn(g, 3, 4, 10, scale=5.0), dim=-1),
        lambda a: O.softmax(a["in_features"], a["dim"]),
        "SOFTMAX_F32",
    ),
    "sdpa": Case(
        "2.sdpa",
        "run_scaled_dot_product_attention",
        7,
        lambda g: dict(Q=_randn(g, 2, 5, 8), K=_randn(g, 2, 7, 8), V=_randn(g, 2, 7, 6), mask=_sdpa_mask(g)),
        lambda a: O.sdpa(a["Q"], a["K"], a["V"], a["mask"]),
        "SDPA_F32",
    ),
    "mha_rope": Case(
        "2.mha",
        "run_multihead_self_attention_with_rope",
        8,
        lambda g: dict(
            d_model=16,
            num_heads=4,
            max_seq_len=16,
            theta=10000.0,
            q_proj_weight=_randn(g, 16, 16, scale=0.25),
            k_proj_weight=_randn(g, 16, 16, scale=0.25),
            v_proj_weight=_randn(g, 16, 16, scale=0.25),
            o_proj_weight=_randn(g, 16, 16, scale=0.25),
            in_features=_randn(g, 2, 6, 16),
            token_positions=torch.arange(6).expand(2, 6).clone(),
        ),
        lambda a: O.mha(
            a["in_features"],
            a["q_proj_weight"],
            a["k_proj_weight"],
            a["v_proj_weight"],
            a["o_proj_weight"],
            a["num_heads"],
            theta=a["theta"],
            positions=a["token_positions"],
        ),
        "MHA_F32",
    ),
    "block": Case(
        "2.block",
        "run_transformer_block",
        9,
        lambda g: dict(
            d_model=16,
            num_heads=4,
            d_ff=48,
            max_seq_len=16,
            theta=10000.0,
            weights=_block_weights(g, 16, 48),
            in_features=_randn(g, 2, 6, 16),
        ),
        lambda a: O.block(a["in_features"], a["weights"], a["num_heads"], a["theta"]),
        "BLOCK_F32",
    ),
    "lm": Case(
        "2.lm",
        "run_transformer_lm",
        10,
        lambda g: dict(
            vocab_size=64,
            context_length=12,
            d_model=16,
            num_layers=2,
            num_heads=4,
            d_ff=48,
            rope_theta=10000.0,
            weights=_lm_weights(g),
            in_indices=torch.randint(0, 64, (2, 10), generator=g),
        ),
        lambda a: O.lm(a["in_indices"], a["weights"], _LM_CFG),
        "LM_F32",
    ),
}

# --- the gpt2 profile (SPEC §6.1): the book's cfg dicts and state-dict keys, eval mode
_GPT2_BLOCK_CFG = G.cfg(vocab=48, context=8, emb=16, heads=4, layers=1, drop=0.1, qkv_bias=True)
_GPT2_MODEL_CFG = G.cfg(vocab=48, context=10, emb=16, heads=4, layers=2, drop=0.1, qkv_bias=True)


def _gpt2_ids(g: torch.Generator, c: dict[str, Any], batch: int, tokens: int) -> torch.Tensor:
    return torch.randint(0, c["vocab_size"], (batch, tokens), generator=g)


CASES.update(
    {
        "gpt2/layernorm": Case(
            "gpt2.layernorm",
            "gpt2_layernorm",
            101,
            lambda g: dict(
                emb_dim=24,
                weights=G.norm_weights(g, "", 24),
                in_features=_randn(g, 2, 5, 24, scale=2.0) + 1.5,
            ),
            lambda a: G.layernorm(a["in_features"], a["weights"]),
            "GPT2_LAYERNORM_F32",
            "gpt2",
        ),
        "gpt2/mha": Case(
            "gpt2.mha",
            "gpt2_mha",
            102,
            lambda g: dict(
                d_in=16,
                d_out=16,
                context_length=8,
                dropout=0.1,
                num_heads=4,
                qkv_bias=True,
                weights=G.mha_weights(g, 16, 16, True),
                in_features=_randn(g, 2, 6, 16),
            ),
            lambda a: G.mha(a["in_features"], a["weights"], a["num_heads"]),
            "GPT2_MHA_F32",
            "gpt2",
        ),
        "gpt2/block": Case(
            "gpt2.block",
            "gpt2_block",
            103,
            lambda g: dict(
                cfg=_GPT2_BLOCK_CFG,
                weights=G.block_weights(g, _GPT2_BLOCK_CFG),
                in_features=_randn(g, 2, 7, 16),
            ),
            lambda a: G.block(a["in_features"], a["weights"], a["cfg"]["n_heads"]),
            "GPT2_BLOCK_F32",
            "gpt2",
        ),
        "gpt2/model": Case(
            "gpt2.model",
            "gpt2_model",
            104,
            lambda g: dict(
                cfg=_GPT2_MODEL_CFG,
                weights=G.model_weights(g, _GPT2_MODEL_CFG),
                in_idx=_gpt2_ids(g, _GPT2_MODEL_CFG, 2, 9),
            ),
            lambda a: G.model(a["in_idx"], a["weights"], a["cfg"]),
            "GPT2_MODEL_F32",
            "gpt2",
        ),
    }
)


def _adapter(profile: str) -> Any:
    """The reference's adapter functions of ``profile``, called in this process."""
    if profile == "gpt2":
        import types

        from lmspec.conformance.judge.worker.binders import gpt2 as binder
        from lmspec.reference import gpt2

        return types.SimpleNamespace(**binder.bind(gpt2))
    from lmspec.reference import adapter

    return adapter


def generate_arrays(name: str) -> dict[str, np.ndarray]:
    """Run the reference adapter on the case's inputs, check the result against
    the float64 oracle, and return the arrays of the .npz."""
    case = CASES[name]
    kwargs = case.build(torch.Generator().manual_seed(case.seed))
    expected = getattr(_adapter(case.profile), case.function)(**kwargs)
    problem = describe_mismatch(expected, case.oracle(kwargs), getattr(T, case.tol))
    if problem is not None:
        raise RuntimeError(f"reference disagrees with the float64 oracle on snapshot {name!r}: {problem}")
    meta = {"spec": case.spec, "function": case.function, "tolerance": case.tol, "seed": case.seed}
    return pack(kwargs, expected, meta)


def generate(name: str) -> bytes:
    """The .npz bytes of ``generate_arrays(name)``."""
    return npz_bytes(generate_arrays(name))


def regeneration_problems(name: str, data: bytes) -> list[str]:
    """How the stored golden ``data`` of case ``name`` fails to regenerate (empty when it does)."""
    path = rel(name)
    case = CASES[name]
    tol = getattr(T, case.tol)
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        stored = {key: npz[key] for key in npz.files}
    fresh = generate_arrays(name)
    if set(stored) != set(fresh):
        return [f"{path}: members {sorted(stored)} but the generator writes {sorted(fresh)} (drift)"]
    problems = [
        f"{path}: {key} regenerates differently (the generator's inputs drifted)"
        for key in sorted(fresh)
        if key != "expected" and (stored[key].dtype != fresh[key].dtype or not np.array_equal(stored[key], fresh[key]))
    ]
    if problems:
        return problems
    kwargs, golden, _ = unpack(stored)
    if (problem := describe_mismatch(golden, case.oracle(kwargs), tol)) is not None:
        problems.append(f"{path}: the stored golden disagrees with the float64 oracle: {problem}")
    if (problem := describe_mismatch(fresh["expected"], golden, tol)) is not None:
        problems.append(f"{path}: the reference's output drifted from the stored golden: {problem}")
    return problems


def regenerate() -> None:
    ROOT.mkdir(exist_ok=True)
    lines = [
        "# sha256  file  generator seed torch; written by `python -m tools.snapshots regenerate`",
    ]
    for name, case in CASES.items():
        data = generate(name)
        path = rel(name)
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_bytes(data)
        lines.append(f"{sha256(data)}  {path}  tools.snapshots:{name} seed={case.seed} torch={torch.__version__}")
        print(f"wrote snapshots/{path} ({len(data)} bytes)")
    MANIFEST.write_text("\n".join(lines) + "\n")


def verify(check_regeneration: bool, root: Path = ROOT) -> list[str]:
    """Problems found in the snapshots under ``root`` (empty when intact)."""
    problems = []
    manifest = read_manifest(root / "MANIFEST")
    for listed_rel, digest in manifest.items():
        path = root / listed_rel
        if not path.is_file():
            problems.append(f"{listed_rel}: listed in MANIFEST but missing")
        elif sha256(path.read_bytes()) != digest:
            problems.append(f"{listed_rel}: sha256 differs from MANIFEST (file changed)")
    listed = {rel(name) for name in CASES}
    problems += [f"{r}: case has no MANIFEST entry" for r in sorted(listed - set(manifest))]
    if check_regeneration:
        for name in CASES:
            path = root / rel(name)
            if path.is_file():
                problems += regeneration_problems(name, path.read_bytes())
    return problems
