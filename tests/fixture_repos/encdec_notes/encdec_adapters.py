"""lmspec's encdec adapter for seq2seq.py (docs/encdec.md walks through it).

The profile passes weights under its own keys (``q_proj.weight``,
``ffn.fc1.bias``, ``norm1.weight``...); ``_rename`` maps them onto this
codebase's state dict (``linears.0.weight``, ``feed_forward.w_1.bias``,
``sublayer.0.norm.a_2``...), and each function builds the part, loads the
renamed weights strictly and runs it in eval mode. Two things of the
codebase are not weights of the profile: its position table, a persistent
buffer (kept as the module built it), and its generator's bias (the
profile's generator has none: zeros). Its ``greedy_decode`` decodes one
sentence, so ``run_greedy_decode`` calls it once per batch row.
"""

import copy

import torch

import seq2seq as s2s

PROJ = {"q_proj": "linears.0", "k_proj": "linears.1", "v_proj": "linears.2", "out_proj": "linears.3"}
NORM = {"weight": "a_2", "bias": "b_2"}
FFN = {"fc1": "w_1", "fc2": "w_2"}
SUBLAYER = {"norm1": "sublayer.0.norm", "norm2": "sublayer.1.norm", "norm3": "sublayer.2.norm"}
PART = {"self_attn": "self_attn", "cross_attn": "src_attn", "ffn": "feed_forward"}


def get_conventions():
    return {"norm": "pre", "layer_norm": "annotated", "output": "log_probs", "smoothing_loss": "kl"}


def _rename(key: str) -> str:
    """One profile key -> this codebase's key."""
    parts = key.split(".")
    out = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if p in ("src_embed", "tgt_embed"):
            out += [p, "0", "lut"]
        elif p == "generator":
            out += ["generator", "proj"]
        elif p in SUBLAYER:
            out += SUBLAYER[p].split(".")
        elif p in PART:
            out.append(PART[p])
        elif p in PROJ:
            out += PROJ[p].split(".")
        elif p in FFN:
            out.append(FFN[p])
        elif p in NORM and out and out[-1] == "norm":
            out.append(NORM[p])
        else:
            out.append(p)
        i += 1
    return ".".join(out)


def _load(module, weights):
    renamed = {_rename(k): v for k, v in weights.items()}
    own = module.state_dict()
    for key, value in own.items():
        if key.endswith(".pe"):  # the position table: a buffer the module computed, not a weight
            renamed.setdefault(key, value)
        elif key == "generator.proj.bias":  # the profile's generator has no bias
            renamed.setdefault(key, torch.zeros_like(value))
    module.load_state_dict(renamed, strict=True)
    return module.eval()


def _mha(d_model, num_heads):
    return s2s.MultiHeadedAttention(num_heads, d_model, dropout=0.0)


def _ffn(d_model, d_ff):
    return s2s.PositionwiseFeedForward(d_model, d_ff, dropout=0.0)


def run_sinusoidal_positions(max_len, d_model):
    return s2s.PositionalEncoding(d_model, 0.0, max_len).pe[0]


def run_source_mask(src, pad_id):
    return (src != pad_id).unsqueeze(-2)


def run_target_mask(tgt, pad_id):
    return (tgt != pad_id).unsqueeze(-2) & s2s.subsequent_mask(tgt.size(-1))


def run_attention(Q, K, V, mask=None):
    return s2s.attention(Q, K, V, mask)[0]


def run_multihead_attention(d_model, num_heads, weights, query, key, value, mask=None):
    return _load(_mha(d_model, num_heads), weights)(query, key, value, mask)


def run_feed_forward(d_model, d_ff, weights, in_features):
    return _load(_ffn(d_model, d_ff), weights)(in_features)


def run_layer_norm(d_model, weights, in_features):
    norm = s2s.LayerNorm(d_model)
    norm.load_state_dict({NORM[k]: v for k, v in weights.items()})
    return norm(in_features)


def run_encoder_layer(d_model, num_heads, d_ff, weights, in_features, src_mask):
    layer = s2s.EncoderLayer(d_model, _mha(d_model, num_heads), _ffn(d_model, d_ff), 0.0)
    return _load(layer, weights)(in_features, src_mask)


def run_decoder_layer(d_model, num_heads, d_ff, weights, in_features, memory, src_mask, tgt_mask):
    mha = _mha(d_model, num_heads)
    layer = s2s.DecoderLayer(d_model, mha, copy.deepcopy(mha), _ffn(d_model, d_ff), 0.0)
    return _load(layer, weights)(in_features, memory, src_mask, tgt_mask)


def _model(src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights):
    model = s2s.make_model(src_vocab_size, tgt_vocab_size, num_layers, d_model, d_ff, num_heads, dropout=0.0)
    return _load(model, weights)


def run_encoder_decoder(
    src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights, src, tgt, src_mask, tgt_mask
):
    model = _model(src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights)
    return model.generator(model(src, tgt, src_mask, tgt_mask))


@torch.no_grad()
def run_greedy_decode(
    src_vocab_size,
    tgt_vocab_size,
    d_model,
    num_layers,
    num_heads,
    d_ff,
    weights,
    src,
    src_mask,
    max_len,
    start_id,
    end_id=None,
):
    model = _model(src_vocab_size, tgt_vocab_size, d_model, num_layers, num_heads, d_ff, weights)
    if end_id is None:  # the codebase's loop decodes one sentence: once per row
        rows = [
            s2s.greedy_decode(model, src[r : r + 1], src_mask[r : r + 1], max_len, start_id) for r in range(len(src))
        ]
        return torch.cat(rows)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_id, dtype=torch.long)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    while ys.size(1) < max_len and not bool(done.all()):
        out = model.decode(memory, src_mask, ys, s2s.subsequent_mask(ys.size(1)))
        word = model.generator(out[:, -1]).argmax(dim=-1)
        word = torch.where(done, torch.full_like(word, end_id), word)
        done |= word == end_id
        ys = torch.cat([ys, word.unsqueeze(1)], dim=1)
    return ys


def run_rate(step, d_model, factor, warmup):
    return s2s.rate(step, d_model, factor, warmup)


def run_label_smoothing_loss(logits, target, smoothing, pad_id):
    criterion = s2s.LabelSmoothing(logits.size(-1), pad_id, smoothing)
    # the notes' training loop divides the summed loss by the number of real tokens
    return criterion(logits, target) / (target != pad_id).sum()
