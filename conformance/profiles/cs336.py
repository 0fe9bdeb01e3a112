"""The cs336 profile: SPEC §1–5, graded through the adapter interface of the
CS336 assignment 1 ``tests/adapters.py`` (2025 and 2026 handouts: the same
names and parameters).

Calling convention: the official tests pass every argument by keyword,
except the leading arguments counted by ``positional`` below
(``run_rope(d_model, theta=..., ...)``, ``run_silu(x)``,
``run_softmax(x, dim=-1)``, ``run_cross_entropy(inputs, targets)``,
``run_gradient_clipping(params, max_norm)``,
``run_save_checkpoint(model, optimizer, iteration=..., out=...)``,
``get_tokenizer(vocab, merges, special_tokens)``).

Points: the CS336 (Stanford, spring 2025) assignment 1 handout, "Assignment
1 (basics): Building a Transformer LM", gives points per problem. The code
problems it grades through ``tests/adapters.py`` are: train_bpe 15,
tokenizer 15, linear 1, embedding 1, rmsnorm 1, positionwise_feedforward 2,
rope 2, softmax 1, scaled_dot_product_attention 5, multihead_self_attention
5, transformer_block 3, transformer_lm 3, cross_entropy 1, adamw 2,
learning_rate_schedule 1, gradient_clipping 1, data_loading 2, checkpointing
1 (total 62). Where one handout problem covers several items the points are
split (our choice, in each item's note). Extended items are optional and
scored apart: decoding 3 (handout "decoding"), ablations 4 (layer_norm,
pre_norm, no_pos_emb and swiglu ablations, one each), accounting 2 (the
checkable part of the written transformer_accounting problem), perplexity 1
(lmspec's own). The audit and the SHOULD items carry no points.
"""

from lmspec.conformance.profiles import FromScratch, Function, Kind, Profile, SpecItem

_LM = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff", "rope_theta", "weights")
_ABLATION = ("*", ("norm", "pre"), ("use_rope", True), ("ffn", "swiglu"))
_MHA = ("q_proj_weight", "k_proj_weight", "v_proj_weight", "o_proj_weight", "in_features")

FUNCTIONS = (
    Function("run_linear", ("d_in", "d_out", "weights", "in_features")),
    Function("run_embedding", ("vocab_size", "d_model", "weights", "token_ids")),
    Function("run_swiglu", ("d_model", "d_ff", "w1_weight", "w2_weight", "w3_weight", "in_features")),
    Function("run_scaled_dot_product_attention", ("Q", "K", "V", ("mask", None))),
    Function("run_multihead_self_attention", ("d_model", "num_heads", *_MHA)),
    Function(
        "run_multihead_self_attention_with_rope",
        ("d_model", "num_heads", "max_seq_len", "theta", *_MHA, ("token_positions", None)),
    ),
    Function("run_rope", ("d_k", "theta", "max_seq_len", "in_query_or_key", "token_positions"), positional=1),
    Function(
        "run_transformer_block", ("d_model", "num_heads", "d_ff", "max_seq_len", "theta", "weights", "in_features")
    ),
    Function("run_transformer_lm", (*_LM, "in_indices")),
    Function("run_rmsnorm", ("d_model", "eps", "weights", "in_features")),
    Function("run_silu", ("in_features",), positional=1),
    Function("run_get_batch", ("dataset", "batch_size", "context_length", "device")),
    Function("run_softmax", ("in_features", "dim"), positional=1),
    Function("run_cross_entropy", ("inputs", "targets"), positional=2),
    Function("run_gradient_clipping", ("parameters", "max_l2_norm"), positional=2, writeback=("parameters",)),
    Function("get_adamw_cls", (), replayable=True, returns="optimizer class"),
    Function(
        "run_get_lr_cosine_schedule",
        ("it", "max_learning_rate", "min_learning_rate", "warmup_iters", "cosine_cycle_iters"),
    ),
    Function(
        "run_save_checkpoint",
        ("model", "optimizer", "iteration", "out"),
        positional=2,
        files={"out": "out"},
        writeback=("out",),
    ),
    Function(
        "run_load_checkpoint",
        ("src", "model", "optimizer"),
        files={"src": "in"},
        writeback=("src", "model", "optimizer"),
    ),
    Function(
        "get_tokenizer",
        ("vocab", "merges", ("special_tokens", None)),
        positional=3,
        replayable=True,
        explicit_defaults=True,
    ),
    Function("run_train_bpe", ("input_path", "vocab_size", "special_tokens", "**kwargs"), files={"input_path": "in"}),
    # --- extended (lmspec's own; docs/students.md "The extended profile") ---
    Function("run_silu_ffn", ("d_model", "d_ff", "w1_weight", "w2_weight", "in_features"), extended=True),
    Function(
        "run_transformer_block_ablation",
        ("d_model", "num_heads", "d_ff", "max_seq_len", "theta", "weights", "in_features", *_ABLATION),
        extended=True,
    ),
    Function("run_transformer_lm_ablation", (*_LM, "in_indices", *_ABLATION), extended=True),
    Function("run_count_parameters", _LM[:6], extended=True),
    Function("run_forward_flops", _LM[:6], extended=True),
    Function("run_perplexity", ("inputs", "targets"), extended=True),
    Function("run_temperature_softmax", ("logits", "temperature"), extended=True),
    Function("run_top_p_filter", ("probs", "top_p"), extended=True),
    Function(
        "run_sample_next_token",
        ("logits", "temperature", "top_p", "generator"),
        writeback=("generator",),
        extended=True,
    ),
    Function(
        "run_generate",
        (*_LM, "prompt", "max_new_tokens", "temperature", "top_p", "eos_token_id", "generator"),
        writeback=("generator",),
        extended=True,
    ),
)

_E, _S, _A = Kind.EXTENDED, Kind.SHOULD, Kind.AUDIT
ITEMS = (
    SpecItem("0.from_scratch", "from-scratch rule (audited, SHOULD)", (), 0, "## 0.", _A, "audited, reported apart"),
    SpecItem(
        "1.1.pretokenize",
        "GPT-2 pre-tokenization, no merges across pre-tokens",
        ("get_tokenizer", "run_train_bpe"),
        3,
        "### 1.1",
        note="split of train_bpe (15)",
    ),
    SpecItem(
        "1.2.train_bpe",
        "BPE training: counts, tie-break, ids, official merges",
        ("run_train_bpe",),
        12,
        "### 1.2",
        note="split of train_bpe (15)",
    ),
    SpecItem(
        "1.2.train_bpe.speed",
        "BPE training is efficient (official 1.5 s bound, SHOULD)",
        ("run_train_bpe",),
        0,
        "### 1.2",
        _S,
    ),
    SpecItem(
        "1.3.encode",
        "encode equals rank-based BPE (tiktoken)",
        ("get_tokenizer",),
        6,
        "- `encode(text)",
        note="split of tokenizer (15)",
    ),
    SpecItem(
        "1.3.decode",
        "decode with errors=replace, round trip (unknown ids: STRICT)",
        ("get_tokenizer",),
        3,
        "- `decode(ids)",
        note="split of tokenizer (15)",
    ),
    SpecItem(
        "1.3.encode_iterable",
        "encode_iterable equals encode over a text's lines, lazily",
        ("get_tokenizer",),
        3,
        "- `encode_iterable(",
        note="split of tokenizer (15)",
    ),
    SpecItem(
        "1.3.encode_iterable.memory",
        "encode_iterable memory bounded (SHOULD)",
        ("get_tokenizer",),
        0,
        "- `encode_iterable(",
        _S,
    ),
    SpecItem(
        "1.3.special_tokens",
        "special tokens: one id, longest match, added to vocab",
        ("get_tokenizer",),
        3,
        "- Special tokens given",
        note="split of tokenizer (15)",
    ),
    SpecItem("2.linear", "Linear y = x W^T", ("run_linear",), 1, "- **Linear("),
    SpecItem("2.embedding", "Embedding row lookup", ("run_embedding",), 1, "- **Embedding("),
    SpecItem("2.rmsnorm", "RMSNorm, float32 internally", ("run_rmsnorm",), 1, "- **RMSNorm("),
    SpecItem(
        "2.silu", "SiLU x*sigmoid(x)", ("run_silu",), 0.5, "- **SiLU**", note="split of positionwise_feedforward (2)"
    ),
    SpecItem(
        "2.swiglu",
        "SwiGLU feed-forward",
        ("run_swiglu",),
        1.5,
        "- **SwiGLU",
        note="split of positionwise_feedforward (2)",
    ),
    SpecItem("2.rope", "RoPE on interleaved pairs, relative invariance", ("run_rope",), 2, "- **RoPE("),
    SpecItem("2.softmax", "numerically stable softmax", ("run_softmax",), 1, "- **softmax("),
    SpecItem(
        "2.sdpa",
        "scaled dot-product attention with boolean mask",
        ("run_scaled_dot_product_attention",),
        5,
        "- **Scaled dot-product attention",
    ),
    SpecItem(
        "2.mha",
        "causal multi-head self-attention (with/without RoPE)",
        ("run_multihead_self_attention", "run_multihead_self_attention_with_rope"),
        5,
        "- **Causal multi-head",
    ),
    SpecItem("2.block", "pre-norm Transformer block", ("run_transformer_block",), 3, "- **Pre-norm block"),
    SpecItem(
        "2.lm",
        "Transformer LM logits, causality, prefix consistency",
        ("run_transformer_lm",),
        3,
        "- **Transformer LM(",
    ),
    SpecItem(
        "2.ablations",
        "ablations: no norm, post-norm, NoPE, SiLU FFN",
        ("run_transformer_block_ablation", "run_transformer_lm_ablation", "run_silu_ffn"),
        4,
        "- **Pre-norm block",
        _E,
        "handout layer_norm, pre_norm, no_pos_emb and swiglu ablations, one each",
    ),
    SpecItem(
        "2.accounting",
        "parameter count and forward FLOPs",
        ("run_count_parameters", "run_forward_flops"),
        2,
        "- Resource accounting",
        _E,
        "the checkable part of the handout's transformer_accounting problem",
    ),
    SpecItem(
        "3.cross_entropy", "stable cross-entropy over leading dims", ("run_cross_entropy",), 1, "- **cross_entropy("
    ),
    SpecItem(
        "3.perplexity",
        "perplexity = exp(mean cross-entropy)",
        ("run_perplexity",),
        1,
        "- **Perplexity",
        _E,
        "lmspec's own",
    ),
    SpecItem("3.adamw", "AdamW update, param groups, state_dict", ("get_adamw_cls",), 2, "- **AdamW("),
    SpecItem(
        "3.cosine_schedule",
        "cosine schedule with linear warmup",
        ("run_get_lr_cosine_schedule",),
        1,
        "- **Cosine schedule",
    ),
    SpecItem(
        "3.gradient_clipping", "global-norm gradient clipping", ("run_gradient_clipping",), 1, "- **Gradient clipping"
    ),
    SpecItem("3.get_batch", "uniform random batches from a 1-D token array", ("run_get_batch",), 2, "- **get_batch("),
    SpecItem(
        "3.checkpoint",
        "checkpoint save/load and exact resume",
        ("run_save_checkpoint", "run_load_checkpoint"),
        1,
        "- **Checkpointing",
    ),
    SpecItem(
        "4.generation",
        "temperature, top-p, sampling loop",
        ("run_temperature_softmax", "run_top_p_filter", "run_sample_next_token", "run_generate"),
        3,
        "## 4.",
        _E,
        "handout decoding",
    ),
)

#: SPEC §0: torch tensors and operations, Parameter, the nn containers, the
#: Optimizer base class and nn.init are allowed; every other torch.nn and
#: torch.nn.functional definition, the torch.optim optimizers and schedulers,
#: clip_grad_norm_ and whole-item shortcuts are reported.
_SHORTCUTS = ("softmax", "log_softmax", "_softmax", "_log_softmax", "rms_norm", "layer_norm", "embedding")
FROM_SCRATCH = FromScratch(
    forbidden=(
        "torch.nn.*",
        "torch.optim.*",
        "torch._C._nn.*",
        *(f"torch.{s}" for s in _SHORTCUTS),
        "torch.special.softmax",
        "torch.special.log_softmax",
        "torch.Tensor.softmax",
        "torch.Tensor.log_softmax",
        *(
            f"torch.nn.utils.{c}"
            for c in (
                "clip_grad_norm_",
                "clip_grad_norm",
                "clip_grad_value_",
                "clip_grads_with_norm_",
                "get_total_norm",
            )
        ),
        *(
            f"torch.nn.utils.clip_grad.{c}"
            for c in (
                "clip_grad_norm_",
                "clip_grad_norm",
                "clip_grad_value_",
                "clip_grads_with_norm_",
                "get_total_norm",
            )
        ),
    ),
    allowed=(
        *(
            f"torch.nn.{n}"
            for n in (
                "Module",
                "ModuleList",
                "ModuleDict",
                "Sequential",
                "ParameterList",
                "ParameterDict",
                "Parameter",
                "Buffer",
                "UninitializedParameter",
                "UninitializedBuffer",
                "parameter",
                "functional",
                "utils",
                "modules",
            )
        ),
        "torch.nn.init.*",
        "torch.nn.parameter.*",
        "torch.nn.utils.*",
        "torch.nn.modules.*",
        "torch.optim.Optimizer",
        "torch.optim.optimizer",
        "torch.optim.optimizer.*",
    ),
)

PROFILE = Profile(
    name="cs336",
    title="CS336 assignment 1 (2025 and 2026 handouts): BPE, LLaMA-style LM, AdamW, training, generation",
    source="CS336 2025 assignment 1 handout (conformance/profiles/cs336.py)",
    functions=FUNCTIONS,
    items=ITEMS,
    reference="lmspec.reference.adapter",
    tests=("cs336",),
    adapter_files=("tests/adapters.py", "adapters.py"),
    markers=tuple(f.name for f in FUNCTIONS),
    from_scratch=FROM_SCRATCH,
)
