"""Training loop (handout section 5.3).

    uv run python -m cs336_basics.train --train data/ts_train.bin --val data/ts_valid.bin --out runs/ts
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from cs336_basics.data import get_batch, load_tokens
from cs336_basics.model import TransformerLM
from cs336_basics.nn_utils import cross_entropy, gradient_clipping
from cs336_basics.optimizer import AdamW, get_lr_cosine_schedule
from cs336_basics.serialization import load_checkpoint, save_checkpoint
from tools.plotting import plot_loss_curves


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--val", required=True)
    p.add_argument("--out", default="runs/default")
    p.add_argument("--resume", default=None)
    p.add_argument("--vocab_size", type=int, default=10000)
    p.add_argument("--context_length", type=int, default=256)
    p.add_argument("--d_model", type=int, default=512)
    p.add_argument("--num_layers", type=int, default=4)
    p.add_argument("--num_heads", type=int, default=16)
    p.add_argument("--d_ff", type=int, default=1344)
    p.add_argument("--rope_theta", type=float, default=10000.0)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--max_iters", type=int, default=5000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min_lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--grad_clip", type=float, default=1.0)
    p.add_argument("--eval_every", type=int, default=250)
    p.add_argument("--eval_batches", type=int, default=20)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return p.parse_args()


@torch.no_grad()
def evaluate(model, data, args) -> float:
    model.eval()
    losses = []
    for _ in range(args.eval_batches):
        x, y = get_batch(data, args.batch_size, args.context_length, args.device)
        losses.append(cross_entropy(model(x), y).item())
    model.train()
    return float(np.mean(losses))


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(vars(args), indent=2))

    train_data = load_tokens(args.train)
    val_data = load_tokens(args.val)

    model = TransformerLM(
        args.vocab_size,
        args.context_length,
        args.d_model,
        args.num_layers,
        args.num_heads,
        args.d_ff,
        args.rope_theta,
        device=args.device,
    )
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    start = 0
    if args.resume:
        start = load_checkpoint(args.resume, model, optimizer)

    steps, train_losses, val_steps, val_losses = [], [], [], []
    t0 = time.time()
    for it in range(start, args.max_iters):
        lr = get_lr_cosine_schedule(it, args.lr, args.min_lr, args.warmup, args.max_iters)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch(train_data, args.batch_size, args.context_length, args.device)
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        gradient_clipping(model.parameters(), args.grad_clip)
        optimizer.step()

        steps.append(it)
        train_losses.append(loss.item())
        if it % args.eval_every == 0 or it == args.max_iters - 1:
            val_steps.append(it)
            val_losses.append(evaluate(model, val_data, args))
            print(f"it {it} | train {loss.item():.3f} | val {val_losses[-1]:.3f} | {time.time() - t0:.0f}s")
            save_checkpoint(model, optimizer, it + 1, out / "ckpt.pt")

    plot_loss_curves(steps, train_losses, val_steps, val_losses, out / "loss.png")


if __name__ == "__main__":
    main()
