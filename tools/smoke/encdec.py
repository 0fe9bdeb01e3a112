"""The encdec smoke run of the reference: learn to reverse sequences.

    lmspec smoke --profile encdec [--out DIR] [--no-typecheck] [--max-seconds S]

On CPU, in about a minute on 2 cores, it

1. makes a synthetic task: source sequences of 4 to 8 symbols (10 symbols,
   padding at the end), targets ``<s> reversed(source) </s>``;
2. trains the reference encoder–decoder (the paper's conventions: post-norm,
   ReLU, the biased LayerNorm) with teacher forcing, the label-smoothed loss
   (ε = 0.1, the annotated distribution), the reference's AdamW (β = 0.9,
   0.98, no weight decay) and the warmup rate rule;
3. decodes fresh sequences greedily (stopping at ``</s>``) and requires the
   share of sequences reversed exactly to exceed ``BAR`` (the untrained model
   gets none right: a sequence of 4 to 8 symbols is one of ~10^8).

The harness (``harness.py``) prints the stages' times and the checks, writes
``summary.json`` and exits with status 1 if a check fails.
"""

import argparse
import os
import time

from .harness import Smoke

BUDGET_S = 60.0
PAD, START, END, FIRST = 0, 1, 2, 3
SYMBOLS = 10
VOCAB = FIRST + SYMBOLS
MIN_LEN, MAX_LEN = 4, 8
MODEL = {"src_vocab_size": VOCAB, "tgt_vocab_size": VOCAB, "d_model": 64, "num_layers": 2, "num_heads": 4, "d_ff": 128}
TRAIN = {"steps": 500, "batch_size": 64, "factor": 1.0, "warmup": 80, "smoothing": 0.1, "seed": 0}
EVAL_SEQUENCES = 200
#: exact-match share of reversed sequences the trained model must exceed
BAR = 0.9


def batch(generator, size: int):
    """(src, tgt): src (size, MAX_LEN) padded; tgt (size, MAX_LEN + 2) = <s> reversed </s> padded."""
    import torch

    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (size,), generator=generator)
    src = torch.full((size, MAX_LEN), PAD, dtype=torch.long)
    tgt = torch.full((size, MAX_LEN + 2), PAD, dtype=torch.long)
    tgt[:, 0] = START
    for r, n in enumerate(lengths.tolist()):
        seq = torch.randint(FIRST, VOCAB, (n,), generator=generator)
        src[r, :n] = seq
        tgt[r, 1 : n + 1] = seq.flip(0)
        tgt[r, n + 1] = END
    return src, tgt


def run(args: argparse.Namespace, smoke: Smoke) -> None:
    started = time.perf_counter()
    smoke.facts["typecheck"] = os.environ.get("JAXTYPING_DISABLE", "0") in ("0", "", "false")
    with smoke.stage("import"):
        import torch

        from lmspec.reference.encdec.layers import source_mask
        from lmspec.reference.encdec.model import EncoderDecoder, greedy_decode
        from lmspec.reference.encdec.training import rate, teacher_forcing_loss
        from lmspec.reference.training.optimizer import AdamW

        threads = torch.get_num_threads()
        smoke.cleanup.callback(torch.set_num_threads, threads)
        torch.set_num_threads(1)
        torch.manual_seed(TRAIN["seed"])
    model = EncoderDecoder(**MODEL, dropout=0.0)
    g = torch.Generator().manual_seed(TRAIN["seed"])
    test_src, test_tgt = batch(torch.Generator().manual_seed(12345), EVAL_SEQUENCES)

    def accuracy() -> tuple[float, float]:
        model.eval()
        out = greedy_decode(model, test_src, source_mask(test_src, PAD), MAX_LEN + 2, START, END)
        model.train()
        width = min(out.shape[1], test_tgt.shape[1])
        got = torch.full_like(test_tgt, END)
        got[:, :width] = out[:, :width]
        real = test_tgt != PAD
        exact = ((got == test_tgt) | ~real).all(dim=1).float().mean().item()
        tokens = ((got == test_tgt) & real).sum().item() / real.sum().item()
        return exact, tokens

    with smoke.stage("untrained"):
        before, _ = accuracy()
        print(f"  untrained greedy accuracy: {before:.1%} of sequences")
    with smoke.stage("train"):
        opt = AdamW(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
        first = last = None
        for step in range(1, TRAIN["steps"] + 1):
            for group in opt.param_groups:
                group["lr"] = rate(step, MODEL["d_model"], TRAIN["factor"], TRAIN["warmup"])
            src, tgt = batch(g, TRAIN["batch_size"])
            loss = teacher_forcing_loss(model, src, tgt, PAD, TRAIN["smoothing"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            last = loss.item()
            first = last if first is None else first
            if step % 100 == 0:
                print(f"  step {step}: loss {last:.3f}")
        smoke.facts.update(first_loss=round(first, 4), final_loss=round(last, 4))
    with smoke.stage("greedy"):
        exact, tokens = accuracy()
        smoke.facts.update(greedy_exact=exact, greedy_tokens=tokens, untrained_exact=before)
        print(f"  greedy decoding: {exact:.1%} of {EVAL_SEQUENCES} sequences reversed exactly, {tokens:.1%} of tokens")
        smoke.check("loss fell", last < first / 2, f"label-smoothed loss {first:.3f} -> {last:.3f}")
        smoke.check("greedy reverses", exact > BAR, f"{exact:.1%} of sequences exact (bar {BAR:.0%})")
    smoke.facts["total_seconds"] = round(time.perf_counter() - started, 2)
