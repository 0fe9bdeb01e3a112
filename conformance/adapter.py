"""The adapter interface as the judge knows it: the function names, their
parameters, how the official tests call them, and how a target
(``--adapter PATH_OR_MODULE``) becomes a worker to start.

The judge never imports the implementation: conformance.proxy forwards every
call to a worker process (tools/worker) that does.

Calling convention (CALL_STYLE): the official CS336 tests (2025 and 2026
handouts, identical here) pass every argument by keyword, except the leading
arguments counted below, which they pass positionally:
``run_rope(d_model, theta=..., ...)``, ``run_silu(x)``,
``run_softmax(x, dim=-1)``, ``run_cross_entropy(inputs, targets)``,
``run_gradient_clipping(params, max_norm)``,
``run_save_checkpoint(model, optimizer, iteration=..., out=...)``,
``get_tokenizer(vocab, merges, special_tokens)``. Calling the same way means
a parameter renamed where the official tests use its name fails here as it
fails there, and nowhere else.
"""

import inspect
import os
from pathlib import Path

DEFAULT_ADAPTER = "lmspec.reference.adapter"
REPO_ROOT = Path(__file__).resolve().parent.parent

_P = inspect.Parameter
# name -> parameters (name or (name, default)); "*" starts keyword-only ones
_SIGNATURES: dict[str, tuple] = {
    "run_linear": ("d_in", "d_out", "weights", "in_features"),
    "run_embedding": ("vocab_size", "d_model", "weights", "token_ids"),
    "run_swiglu": ("d_model", "d_ff", "w1_weight", "w2_weight", "w3_weight", "in_features"),
    "run_scaled_dot_product_attention": ("Q", "K", "V", ("mask", None)),
    "run_multihead_self_attention": (
        "d_model",
        "num_heads",
        "q_proj_weight",
        "k_proj_weight",
        "v_proj_weight",
        "o_proj_weight",
        "in_features",
    ),
    "run_multihead_self_attention_with_rope": (
        "d_model",
        "num_heads",
        "max_seq_len",
        "theta",
        "q_proj_weight",
        "k_proj_weight",
        "v_proj_weight",
        "o_proj_weight",
        "in_features",
        ("token_positions", None),
    ),
    "run_rope": ("d_k", "theta", "max_seq_len", "in_query_or_key", "token_positions"),
    "run_transformer_block": ("d_model", "num_heads", "d_ff", "max_seq_len", "theta", "weights", "in_features"),
    "run_transformer_lm": (
        "vocab_size",
        "context_length",
        "d_model",
        "num_layers",
        "num_heads",
        "d_ff",
        "rope_theta",
        "weights",
        "in_indices",
    ),
    "run_rmsnorm": ("d_model", "eps", "weights", "in_features"),
    "run_silu": ("in_features",),
    "run_get_batch": ("dataset", "batch_size", "context_length", "device"),
    "run_softmax": ("in_features", "dim"),
    "run_cross_entropy": ("inputs", "targets"),
    "run_gradient_clipping": ("parameters", "max_l2_norm"),
    "get_adamw_cls": (),
    "run_get_lr_cosine_schedule": (
        "it",
        "max_learning_rate",
        "min_learning_rate",
        "warmup_iters",
        "cosine_cycle_iters",
    ),
    "run_save_checkpoint": ("model", "optimizer", "iteration", "out"),
    "run_load_checkpoint": ("src", "model", "optimizer"),
    "get_tokenizer": ("vocab", "merges", ("special_tokens", None)),
    "run_train_bpe": ("input_path", "vocab_size", "special_tokens", "**kwargs"),
    # --- extended profile (lmspec's own; README "The extended profile") ---
    "run_silu_ffn": ("d_model", "d_ff", "w1_weight", "w2_weight", "in_features"),
    "run_transformer_block_ablation": (
        "d_model",
        "num_heads",
        "d_ff",
        "max_seq_len",
        "theta",
        "weights",
        "in_features",
        "*",
        ("norm", "pre"),
        ("use_rope", True),
        ("ffn", "swiglu"),
    ),
    "run_transformer_lm_ablation": (
        "vocab_size",
        "context_length",
        "d_model",
        "num_layers",
        "num_heads",
        "d_ff",
        "rope_theta",
        "weights",
        "in_indices",
        "*",
        ("norm", "pre"),
        ("use_rope", True),
        ("ffn", "swiglu"),
    ),
    "run_count_parameters": ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"),
    "run_forward_flops": ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"),
    "run_perplexity": ("inputs", "targets"),
    "run_temperature_softmax": ("logits", "temperature"),
    "run_top_p_filter": ("probs", "top_p"),
    "run_sample_next_token": ("logits", "temperature", "top_p", "generator"),
    "run_generate": (
        "vocab_size",
        "context_length",
        "d_model",
        "num_layers",
        "num_heads",
        "d_ff",
        "rope_theta",
        "weights",
        "prompt",
        "max_new_tokens",
        "temperature",
        "top_p",
        "eos_token_id",
        "generator",
    ),
}

CORE_FUNCTIONS: tuple[str, ...] = tuple(_SIGNATURES)[:21]
EXTENDED_FUNCTIONS: tuple[str, ...] = tuple(_SIGNATURES)[21:]

#: How many leading arguments the official tests pass positionally (the rest by keyword).
CALL_STYLE: dict[str, int] = {
    "run_rope": 1,
    "run_silu": 1,
    "run_softmax": 1,
    "run_cross_entropy": 2,
    "run_gradient_clipping": 2,
    "run_save_checkpoint": 2,
    "get_tokenizer": 3,
}
#: Path arguments that name a file the function reads ("in") or writes ("out").
FILE_ARGS: dict[str, dict[str, str]] = {
    "run_train_bpe": {"input_path": "in"},
    "run_load_checkpoint": {"src": "in"},
    "run_save_checkpoint": {"out": "out"},
}
#: Arguments whose in-place changes the interface defines (copied back to the judge).
WRITEBACK_ARGS: dict[str, tuple[str, ...]] = {
    "run_gradient_clipping": ("parameters",),
    "run_load_checkpoint": ("src", "model", "optimizer"),
    "run_save_checkpoint": ("out",),
    "run_sample_next_token": ("generator",),
    "run_generate": ("generator",),
}
#: Functions whose returned object can be made again after a worker restart.
REPLAYABLE = frozenset({"get_tokenizer", "get_adamw_cls"})


def signature(name: str) -> inspect.Signature:
    params = []
    kind = _P.POSITIONAL_OR_KEYWORD
    for entry in _SIGNATURES[name]:
        if entry == "*":
            kind = _P.KEYWORD_ONLY
        elif entry == "**kwargs":
            params.append(_P("kwargs", _P.VAR_KEYWORD))
        elif isinstance(entry, tuple):
            params.append(_P(entry[0], kind, default=entry[1]))
        else:
            params.append(_P(entry, kind))
    return inspect.Signature(params)


class NotImplementedByAdapter(Exception):
    """An adapter function that is absent or raises NotImplementedError."""

    def __init__(self, name: str, extended: bool | None = None, detail: str = ""):
        self.name = name
        self.extended = name in EXTENDED_FUNCTIONS if extended is None else extended
        kind = "not provided" if self.extended else "not implemented"
        super().__init__(f"{kind}: {name}" + (f" ({detail})" if detail else ""))


_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def looks_like_path(target: str) -> bool:
    return target.endswith(".py") or os.sep in target or "/" in target or Path(target).exists()


def submission_root(adapter_file: Path) -> Path:
    """The folder the submission lives in: the nearest ancestor of the
    adapters file with a repository marker. lmspec's own adapters (mutants,
    variants, hostile files in its tests/) are single files: their folder."""
    adapter_file = adapter_file.resolve()
    for parent in adapter_file.parents:
        if any((parent / marker).exists() for marker in _ROOT_MARKERS):
            if parent == REPO_ROOT:
                return adapter_file.parent
            return parent
    return adapter_file.parent


def lmspec_own(adapter_file: Path) -> bool:
    """An adapter file from lmspec's own tests (built on the reference)."""
    return adapter_file.resolve().is_relative_to(REPO_ROOT / "tests")
