"""The gpt2 profile: SPEC §6.1, the GPT-2-style model of the book "Build a
Large Language Model (From Scratch)".

A reader writes no adapter: the graded file or module defines the book's
names (``GPTModel``, ``MultiHeadAttention``, ``generate``, ...; the way
readers keep them: one ``previous_chapters.py``-style file, a package, or a
file importing them) and the binder (conformance/judge/worker/binders/gpt2.py)
turns them into the functions below, inside the sandboxed worker. Renamed
names are mapped by a small file that imports them under the book's names::

    # lmspec_gpt2.py, graded with: lmspec grade --profile gpt2 lmspec_gpt2.py
    from my_gpt import MyGPT as GPTModel, Attention as MultiHeadAttention  # noqa: F401
    from my_gpt import *  # noqa: F403  the names already spelled as in the book

and, when its submodules are named differently from the book's state-dict
keys, a function ``lmspec_map_weights(weights, module) -> dict`` that renames
the keys for ``module`` (the reader's freshly built class being loaded).
The functions are lmspec's (the book has no adapter interface): every
argument goes by keyword.

Extended: ``get_lr_and_clip(global_step, initial_lr, peak_lr, min_lr,
warmup_steps, total_training_steps) -> (lr, clip)`` is the appendix's
schedule as a function (the book writes it inline in its training loop), an
optional name a reader may define; the parameter count is read off the
reader's own ``GPTModel``.

Points: the book gives none. lmspec's defaults weigh the parts by the work
the book spends on them: 1 each for LayerNorm, GELU, the feed-forward network
and the loss; 2 for the block, the dataset and ``generate``; 3 for
multi-head attention, the model and loading the GPT-2 weights; 1 for
``generate_text_simple`` (total 20: 14 for chapters 2–4, 6 for chapter 5).
The verdict covers the chapters a reader has started (``CHAPTERS``), and
``--chapters`` names chapters that count in full. Extended: 1 each for the schedule and
the parameter count. The audit carries no points. ``--points FILE``
overrides them as for every profile.
"""

from lmspec.conformance.profiles import FromScratch, Function, Kind, Profile, SpecItem

_CFG_W = ("cfg", "weights")
_TRAIN = (("train", False), ("seed", None))

FUNCTIONS = (
    Function("gpt2_layernorm", ("emb_dim", "weights", "in_features")),
    Function("gpt2_gelu", ("in_features",)),
    Function("gpt2_feedforward", (*_CFG_W, "in_features")),
    Function(
        "gpt2_mha",
        ("d_in", "d_out", "context_length", "dropout", "num_heads", "qkv_bias", "weights", "in_features", *_TRAIN),
    ),
    Function("gpt2_block", (*_CFG_W, "in_features", *_TRAIN)),
    Function("gpt2_model", (*_CFG_W, "in_idx", *_TRAIN)),
    Function("gpt2_model_info", ("cfg", "weights")),
    Function("gpt2_generate_simple", (*_CFG_W, "idx", "max_new_tokens", "context_size")),
    Function(
        "gpt2_generate",
        (
            *_CFG_W,
            "idx",
            "max_new_tokens",
            "context_size",
            ("temperature", 0.0),
            ("top_k", None),
            ("eos_id", None),
            ("seed", 0),
        ),
    ),
    Function(
        "gpt2_generate_draws",
        (*_CFG_W, "idx", "context_size", "temperature", ("top_k", None), ("seeds", ())),
    ),
    Function("gpt2_dataset", ("txt", "max_length", "stride")),
    Function("gpt2_dataloader", ("txt", "batch_size", "max_length", "stride", "shuffle", "drop_last", ("seed", 0))),
    Function("gpt2_loss_batch", (*_CFG_W, "input_batch", "target_batch")),
    Function("gpt2_loss_loader", (*_CFG_W, "batches", ("num_batches", None))),
    Function("gpt2_load_weights", ("cfg", "params", "in_idx")),
    # --- extended ---
    Function(
        "gpt2_lr_and_clip",
        ("global_step", "initial_lr", "peak_lr", "min_lr", "warmup_steps", "total_training_steps"),
        extended=True,
    ),
    Function("gpt2_count_parameters", ("cfg",), extended=True),
)

_E, _A = Kind.EXTENDED, Kind.AUDIT
ITEMS = (
    SpecItem("gpt2.from_scratch", "from-scratch list of the book (audited)", (), 0, "- From-scratch list", _A),
    SpecItem(
        "gpt2.layernorm",
        "LayerNorm: biased variance, eps 1e-5 inside the root, scale/shift",
        ("gpt2_layernorm",),
        1,
        "- **LayerNorm**",
    ),
    SpecItem("gpt2.gelu", "GELU, tanh approximation", ("gpt2_gelu",), 1, "- **GELU**"),
    SpecItem(
        "gpt2.feedforward",
        "FeedForward Linear(E,4E), GELU, Linear(4E,E)",
        ("gpt2_feedforward",),
        1,
        "- **FeedForward**",
    ),
    SpecItem(
        "gpt2.mha",
        "causal multi-head attention, contiguous heads, biased out_proj",
        ("gpt2_mha",),
        3,
        "- **MultiHeadAttention**",
    ),
    SpecItem("gpt2.block", "pre-norm block with shortcut dropout", ("gpt2_block",), 2, "- **TransformerBlock**"),
    SpecItem(
        "gpt2.model",
        "GPTModel logits, positions, dropout, untied head",
        ("gpt2_model", "gpt2_model_info"),
        3,
        "- **GPTModel**",
    ),
    SpecItem(
        "gpt2.generate_simple",
        "generate_text_simple: crop, argmax, append",
        ("gpt2_generate_simple",),
        1,
        "- **generate_text_simple**",
    ),
    SpecItem(
        "gpt2.generate",
        "generate: top-k, temperature, eos",
        ("gpt2_generate", "gpt2_generate_draws"),
        2,
        "- **generate** (",
    ),
    SpecItem(
        "gpt2.dataset",
        "GPTDatasetV1 sliding windows, create_dataloader_v1",
        ("gpt2_dataset", "gpt2_dataloader"),
        2,
        "- **GPTDatasetV1**",
    ),
    SpecItem(
        "gpt2.loss",
        "calc_loss_batch and calc_loss_loader",
        ("gpt2_loss_batch", "gpt2_loss_loader"),
        1,
        "- **calc_loss_batch**",
    ),
    SpecItem(
        "gpt2.load_weights",
        "load_weights_into_gpt from the GPT-2 checkpoint layout",
        ("gpt2_load_weights",),
        3,
        "- **load_weights_into_gpt(",
    ),
    SpecItem(
        "gpt2.schedule",
        "appendix schedule: warmup, cosine, clipping after warmup",
        ("gpt2_lr_and_clip",),
        1,
        "Extended (optional)",
        _E,
        "lmspec's own function name for the appendix's inline schedule",
    ),
    SpecItem(
        "gpt2.param_count",
        "parameter count with and without the tied head",
        ("gpt2_count_parameters",),
        1,
        "Extended (optional)",
        _E,
        "read off the reader's GPTModel",
    ),
)

_TRANSFORMER = (
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
)
FROM_SCRATCH = FromScratch(
    forbidden=(
        "torch.nn.LayerNorm",
        "torch.nn.GELU",
        "torch.nn.MultiheadAttention",
        *(f"torch.nn.{n}" for n in _TRANSFORMER),
        "torch.nn.functional.gelu",
        "torch.nn.functional.layer_norm",
        "torch.nn.functional.scaled_dot_product_attention",
        "torch.nn.functional.multi_head_attention_forward",
        "torch.layer_norm",
        "torch._C._nn.gelu",
        "torch._C._nn.scaled_dot_product_attention",
    ),
)

MARKERS = (
    "GPTModel",
    "MultiHeadAttention",
    "TransformerBlock",
    "FeedForward",
    "LayerNorm",
    "GELU",
    "generate_text_simple",
    "generate",
    "GPTDatasetV1",
    "create_dataloader_v1",
    "calc_loss_batch",
    "calc_loss_loader",
    "load_weights_into_gpt",
)

#: The book's chapters and the items each writes (the verdict covers the chapters a reader has started).
CHAPTERS = (
    ("2", ("gpt2.dataset",)),
    ("3", ("gpt2.mha",)),
    (
        "4",
        ("gpt2.layernorm", "gpt2.gelu", "gpt2.feedforward", "gpt2.block", "gpt2.model", "gpt2.generate_simple"),
    ),
    ("5", ("gpt2.loss", "gpt2.generate", "gpt2.load_weights")),
)

PROFILE = Profile(
    name="gpt2",
    title='GPT-2-style model of "Build a Large Language Model (From Scratch)" (the book\'s own names)',
    source="lmspec's defaults (the book gives no points): conformance/profiles/gpt2.py",
    functions=FUNCTIONS,
    items=ITEMS,
    reference="lmspec.reference.gpt2",
    tests=("gpt2",),
    adapter_files=("previous_chapters.py", "gpt.py", "gpt_model.py"),
    markers=MARKERS,
    from_scratch=FROM_SCRATCH,
    binder="gpt2",
    data=("gpt2_vocab.json",),
    chapters=CHAPTERS,
)
