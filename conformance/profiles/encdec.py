"""The encdec profile: SPEC §6.2, the encoder–decoder Transformer of
"Attention Is All You Need" as the paper and the common from-scratch notes
build it, graded through the adapter functions SPEC §6.2 defines (no course
ships an adapter file for it: the suite calls every function by keyword), or,
for a file or module that retypes the annotated notes, through their own
names (``ANNOTATED_NAMES``, bound by the profile's binder).

``get_conventions()`` declares the choices the texts differ on (pre- or
post-norm, the LayerNorm variant, the activation, logits or
log-probabilities, fully masked rows, the label-smoothing variant and loss);
the oracles follow the declaration (conformance/encdec/conventions.py).

Points: no curriculum grades this model, so the points are lmspec's own, one
per distinct rule an item checks, weighted by how much of the model the item
covers: masks 2 (source, target), attention 3 (scaling, mask polarity,
n ≠ m), mha 4 (projections, head split, separate q/k/v inputs,
mask per head), ffn 1, layernorm 2 (statistics, gain and bias), positions 2
(the formula, interleaving), encoder_layer 3 and decoder_layer 4 (one per
sublayer plus the residual placement), model 4 (embedding scale, positions,
stacks, output), greedy 3 (the loop, the start id, stopping), rate 1,
label_smoothing 3 (the distribution, padding, the mean) — 32 in all.
Extended, scored apart, one point per rule: ALiBi biases 1, local attention
masks 1, RoPE on Q and K 1 (the pair rotation), gradient checkpointing 1 (the
same output and gradients with and without).
"""

from lmspec.conformance.profiles import FromScratch, Function, Kind, Profile, SpecItem

_SIZES = ("src_vocab_size", "tgt_vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "weights")

FUNCTIONS = (
    Function("get_conventions", (), replayable=True),
    Function("run_sinusoidal_positions", ("max_len", "d_model")),
    Function("run_source_mask", ("src", "pad_id")),
    Function("run_target_mask", ("tgt", "pad_id")),
    Function("run_attention", ("Q", "K", "V", ("mask", None))),
    Function("run_multihead_attention", ("d_model", "num_heads", "weights", "query", "key", "value", ("mask", None))),
    Function("run_feed_forward", ("d_model", "d_ff", "weights", "in_features")),
    Function("run_layer_norm", ("d_model", "weights", "in_features")),
    Function("run_encoder_layer", ("d_model", "num_heads", "d_ff", "weights", "in_features", "src_mask")),
    Function(
        "run_decoder_layer",
        ("d_model", "num_heads", "d_ff", "weights", "in_features", "memory", "src_mask", "tgt_mask"),
    ),
    Function("run_encoder_decoder", (*_SIZES, "src", "tgt", "src_mask", "tgt_mask")),
    Function("run_greedy_decode", (*_SIZES, "src", "src_mask", "max_len", "start_id", ("end_id", None))),
    Function("run_rate", ("step", "d_model", "factor", "warmup")),
    Function("run_label_smoothing_loss", ("logits", "target", "smoothing", "pad_id")),
    # --- extended ---
    Function("run_alibi_bias", ("num_heads", "seq_len"), extended=True),
    Function("run_local_attention_mask", ("seq_len", "window"), extended=True),
    Function(
        "run_rotary_embedding", ("d_k", "theta", "max_seq_len", "in_query_or_key", "token_positions"), extended=True
    ),
    Function(
        "run_encoder_layer_gradients",
        ("d_model", "num_heads", "d_ff", "weights", "in_features", "src_mask", "grad_output", "checkpoint"),
        extended=True,
    ),
)

#: the annotated notes' names (SPEC §6.2): a file or module defining them is
#: graded without an adapter file (conformance/judge/worker/binders/encdec.py)
ANNOTATED_NAMES = (
    "make_model",
    "EncoderDecoder",
    "MultiHeadedAttention",
    "PositionwiseFeedForward",
    "LayerNorm",
    "PositionalEncoding",
    "subsequent_mask",
    "greedy_decode",
    "LabelSmoothing",
    "rate",
)

_E, _A = Kind.EXTENDED, Kind.AUDIT
ITEMS = (
    SpecItem(
        "encdec.from_scratch",
        "from-scratch list (audited, SHOULD)",
        (),
        0,
        "- From-scratch list (SHOULD)",
        _A,
        "audited, reported apart",
    ),
    SpecItem(
        "encdec.masks",
        "source mask (batch, 1, src_len); target mask = not padding AND causal",
        ("run_source_mask", "run_target_mask"),
        2,
        "- **Masks**",
        note="source, target",
    ),
    SpecItem(
        "encdec.attention",
        "scaled dot-product attention, n != m, True = may attend",
        ("run_attention",),
        3,
        "- **Attention(Q, K, V, mask)**",
        note="scaling, mask polarity, n != m",
    ),
    SpecItem(
        "encdec.mha",
        "multi-head attention (biases as declared), separate query/key/value inputs",
        ("run_multihead_attention",),
        4,
        "- **MultiHeadAttention(d_model, h)**",
        note="projections (with biases unless declared without), head split, separate inputs, mask per head",
    ),
    SpecItem(
        "encdec.ffn", "position-wise FFN, ReLU (or GELU, declared)", ("run_feed_forward",), 1, "- **Position-wise FFN"
    ),
    SpecItem(
        "encdec.layernorm",
        "LayerNorm: biased variance (or the annotated variant, declared)",
        ("run_layer_norm",),
        2,
        "- **LayerNorm(d_model)**",
        note="statistics, gain and bias",
    ),
    SpecItem(
        "encdec.positions",
        "sinusoidal positions, interleaved sin/cos",
        ("run_sinusoidal_positions",),
        2,
        "- **Sinusoidal positions**",
        note="formula, interleaving",
    ),
    SpecItem(
        "encdec.encoder_layer",
        "encoder layer, post-norm (or pre-norm, declared)",
        ("run_encoder_layer",),
        3,
        "- **Residual blocks**",
        note="two sublayers plus the residual placement",
    ),
    SpecItem(
        "encdec.decoder_layer",
        "decoder layer: masked self-attention, cross-attention, FFN",
        ("run_decoder_layer",),
        4,
        "- **Residual blocks**",
        note="three sublayers plus the residual placement",
    ),
    SpecItem(
        "encdec.model",
        "the full model: scaled embeddings + positions, stacks, generator; causality, padding invariance",
        ("run_encoder_decoder",),
        4,
        "- **The model(",
        note="embedding scale, positions, stacks, output",
    ),
    SpecItem(
        "encdec.greedy",
        "greedy decoding from start_id, stopping at max_len or end_id",
        ("run_greedy_decode",),
        3,
        "- **Greedy decoding(",
        note="the loop, the start id, stopping",
    ),
    SpecItem("encdec.rate", "the warmup learning-rate rule", ("run_rate",), 1, "- **Learning-rate rate("),
    SpecItem(
        "encdec.label_smoothing",
        "label-smoothed loss over non-padding targets",
        ("run_label_smoothing_loss",),
        3,
        "- **Label smoothing(",
        note="distribution, padding, mean",
    ),
    SpecItem(
        "encdec.alibi",
        "ALiBi causal biases with geometric head slopes",
        ("run_alibi_bias",),
        1,
        "Extended (optional)",
        _E,
        "lmspec's own",
    ),
    SpecItem(
        "encdec.local_attention",
        "local attention mask i - w < j <= i",
        ("run_local_attention_mask",),
        1,
        "Extended (optional)",
        _E,
        "lmspec's own",
    ),
    SpecItem(
        "encdec.rope",
        "RoPE on Q and K: adjacent pairs (2k, 2k+1) rotated by i / theta^(2k/d_k)",
        ("run_rotary_embedding",),
        1,
        "Extended (optional)",
        _E,
        "lmspec's own",
    ),
    SpecItem(
        "encdec.checkpointing",
        "gradient checkpointing: the same output and gradients with and without",
        ("run_encoder_layer_gradients",),
        1,
        "Extended (optional)",
        _E,
        "lmspec's own",
    ),
)

#: SPEC §6.2: the Transformer modules, MultiheadAttention and LayerNorm (and its
#: functional form) are reported; Linear, Embedding, Dropout and
#: F.scaled_dot_product_attention are allowed, as are the containers.
FROM_SCRATCH = FromScratch(
    forbidden=(
        "torch.nn.Transformer",
        "torch.nn.TransformerEncoder",
        "torch.nn.TransformerDecoder",
        "torch.nn.TransformerEncoderLayer",
        "torch.nn.TransformerDecoderLayer",
        "torch.nn.modules.transformer.*",
        "torch.nn.MultiheadAttention",
        "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.LayerNorm",
        "torch.nn.modules.normalization.LayerNorm",
        "torch.nn.functional.layer_norm",
        "torch.layer_norm",
        "torch.native_layer_norm",
        "torch._transformer_encoder_layer_fwd",
        "torch._native_multi_head_attention",
    ),
    allowed=("torch.nn.functional.scaled_dot_product_attention",),
)

PROFILE = Profile(
    name="encdec",
    title='the encoder-decoder Transformer of "Attention Is All You Need" (paper and common from-scratch notes)',
    source="lmspec's own points (conformance/profiles/encdec.py)",
    functions=FUNCTIONS,
    items=ITEMS,
    reference="lmspec.reference.encdec.adapter",
    tests=("encdec",),
    adapter_files=(
        "encdec_adapters.py",
        "tests/encdec_adapters.py",
        "adapters.py",
        "tests/adapters.py",
        "the_annotated_transformer.py",
    ),
    markers=(*(f.name for f in FUNCTIONS), *ANNOTATED_NAMES),
    from_scratch=FROM_SCRATCH,
    binder="encdec",
)
