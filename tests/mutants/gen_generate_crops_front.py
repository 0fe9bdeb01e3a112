"""MUTANT: the decoding loop feeds the FIRST context_length tokens instead of the last."""

import torch

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.generation import sample_next_token
from lmspec.reference.nn import ModelConfig, TransformerLM, load_weights

MUTANT = {
    "spec": "4.generation",
    "bug": ("tokens[:context_length] instead of tokens[-context_length:]: long prompts freeze the window"),
    "run": ["4.generation"],
    "hinted": ["the first context_length tokens instead of the last"],
}


def run_generate(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta, weights,
    prompt, max_new_tokens, temperature, top_p, eos_token_id, generator,
):  # fmt: skip
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, float(rope_theta))
    model = TransformerLM(config)
    load_weights(model, weights)
    tokens, new = list(prompt), []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(torch.tensor([tokens[:context_length]]))[0, -1]  # BUG
            token = sample_next_token(logits, temperature, top_p, generator)
            tokens.append(token)
            new.append(token)
            if token == eos_token_id:
                break
    return new
