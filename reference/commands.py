"""What the reference's commands do, once their arguments are parsed
(reference/cli.py builds the parser and dispatches here): ``train-bpe``,
``encode``, ``train``, ``generate``."""

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lmspec.reference.training.config import TrainConfig

EOT = "<|endoftext|>"
EXIT_INTERRUPTED = 130

__all__ = ["EOT", "EXIT_INTERRUPTED", "UsageError", "run_encode", "run_generate", "run_train", "run_train_bpe"]


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


def _special_tokens(args: argparse.Namespace) -> list[str]:
    if args.no_special_tokens:
        if args.special_tokens:
            raise UsageError("--special-token and --no-special-tokens contradict each other")
        return []
    return args.special_tokens or [EOT]


def _train_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys given as flags (field flags default to SUPPRESS: absent unless given,
    so an explicit ``none`` arrives as None and still overrides the file)."""
    overrides: dict[str, Any] = {}
    model: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if dest.startswith("model."):
            model[dest.removeprefix("model.")] = value
        elif dest in _TRAIN_FIELDS:
            overrides[dest] = list(value) if isinstance(value, list) else value
    if model:
        overrides["model"] = model
    return overrides


_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)} - {"model"}


# --- commands ------------------------------------------------------------------------


def run_train_bpe(args: argparse.Namespace) -> int:
    from lmspec.reference.tokenizer import Tokenizer, train_bpe

    specials = _special_tokens(args)
    _require_file(args.input, "input")
    if args.input.stat().st_size == 0:
        raise UsageError(f"input {str(args.input)!r} is empty: there is nothing to train a tokenizer on")
    started = time.perf_counter()
    vocab, merges = train_bpe(
        args.input,
        args.vocab_size,
        specials,
        num_workers=args.workers,
        progress=_bars(args),
        on_phase=_phase_lines(args, "train-bpe"),
    )
    seconds = time.perf_counter() - started
    asked = args.vocab_size - 256 - len(specials)
    if len(merges) < asked:
        print(
            f"warning: made {len(merges):,} of the {asked:,} merges asked for (--vocab-size {args.vocab_size:,}): "
            f"{args.input} has no more pairs of tokens to merge; the vocabulary has {len(vocab):,} tokens",
            file=sys.stderr,
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    vocab_path, merges_path = args.out_dir / "vocab.json", args.out_dir / "merges.txt"
    Tokenizer(vocab, merges, specials).save(vocab_path, merges_path)
    longest = sorted(vocab.values(), key=len, reverse=True)[:5]
    print(
        f"trained {len(vocab):,} tokens ({len(merges):,} merges) on {args.input} "
        f"({args.input.stat().st_size:,} bytes) in {seconds:.2f} s"
    )
    print(f"longest tokens: {', '.join(repr(t.decode('utf-8', 'replace')) for t in longest)}")
    print(f"wrote {vocab_path} and {merges_path}")
    return 0


def _load_tokenizer(directory: Path, specials: list[str]) -> Any:
    from lmspec.reference.tokenizer import Tokenizer

    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    for path in (vocab_path, merges_path):
        _require_file(path, "tokenizer file")
    return Tokenizer.from_files(vocab_path, merges_path, specials)


def run_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from lmspec.reference.tokenizer import encode_file

    if not 0.0 <= args.val_fraction < 1.0:
        raise UsageError(f"--val-fraction ({args.val_fraction}) must be in [0, 1)")
    if args.val_fraction > 0 and args.val_output is None:
        raise UsageError("--val-fraction needs --val-output (where the validation tokens go)")
    if args.val_output is not None and args.val_fraction == 0:
        raise UsageError("--val-output needs --val-fraction > 0")
    specials = _special_tokens(args)
    _require_file(args.input, "input")
    tokenizer = _load_tokenizer(args.tokenizer, specials)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    target = args.output
    if args.val_fraction > 0:
        fd, tmp = tempfile.mkstemp(dir=args.output.parent, prefix=f".{args.output.name}.", suffix=".npy")
        os.close(fd)
        target = Path(tmp)
    try:
        stats = encode_file(tokenizer, args.input, target, progress=_bars(args))
        print(
            f"encoded {stats.bytes_read:,} bytes -> {stats.tokens:,} tokens ({stats.dtype}) in "
            f"{stats.seconds:.2f} s: {stats.megabytes_per_second:.2f} MB/s, "
            f"{stats.bytes_per_token:.2f} bytes/token"
        )
        if args.val_fraction == 0:
            print(f"wrote {args.output}")
            return 0
        tokens = np.load(target, mmap_mode="r")
        eot = tokenizer.special_token_ids.get(args.doc_separator)
        cut, at_boundary = _split_point(tokens, args.val_fraction, eot)
        if not 0 < cut < len(tokens):
            raise ValueError(
                f"cannot split {len(tokens):,} tokens with --val-fraction {args.val_fraction}: one side would be empty"
            )
        _write_slice(tokens, 0, cut, args.output)
        _write_slice(tokens, cut, len(tokens), args.val_output)
        where = (
            f"after a {args.doc_separator} at token {cut - 1:,}"
            if at_boundary
            else f"at token {cut:,} (no {args.doc_separator} found: not a document boundary)"
        )
        print(
            f"split {where}: {cut:,} train tokens -> {args.output}, "
            f"{len(tokens) - cut:,} validation tokens -> {args.val_output}"
        )
        return 0
    finally:
        if target != args.output:
            Path(target).unlink(missing_ok=True)


def _split_point(tokens: Any, val_fraction: float, separator_id: int | None) -> tuple[int, bool]:
    """Index where validation starts: just after the separator nearest the target,
    searched in growing windows so a memmap is never scanned whole."""
    import numpy as np

    n = len(tokens)
    target = round(n * (1.0 - val_fraction))
    if separator_id is None:
        return target, False
    width = 1 << 16
    while True:
        lo, hi = max(0, target - width), min(n, target + width)
        hits = np.flatnonzero(np.asarray(tokens[lo:hi]) == separator_id) + lo
        hits = hits[hits + 1 < n]  # a cut after the very last token leaves no validation
        if len(hits):
            best = int(hits[np.argmin(np.abs(hits + 1 - target))])
            return best + 1, True
        if lo == 0 and hi == n:
            return target, False
        width *= 4


def _write_slice(tokens: Any, start: int, stop: int, path: Path) -> None:
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=tokens.dtype, shape=(stop - start,))
    step = 1 << 24
    for i in range(start, stop, step):
        j = min(stop, i + step)
        out[i - start : j - start] = tokens[i:j]
    out.flush()
    del out


def run_train(args: argparse.Namespace) -> int:
    config = TrainConfig.load(args.config, _train_overrides(args))
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=2))
        return 0
    from lmspec.reference.training.loop import train

    progress = _bars(args)
    print(
        f"training {_describe_model(config)} on {config.train_data} "
        f"for {config.steps:,} steps of {config.batch_size}x{config.model.context_length} tokens "
        f"on {config.device}",
    )
    result = train(config, progress=progress, verbose=True)
    val = f", last val loss {result.val_loss:.4f}" if result.val_loss is not None else ""
    train_loss = f"train loss {result.train_loss:.4f}" if result.train_loss is not None else "no new steps"
    print(
        f"{'interrupted' if result.interrupted else 'done'} at step "
        f"{result.step:,}/{config.steps:,}: "
        f"{train_loss}{val} (ln V = {math.log(config.model.vocab_size):.4f}), "
        f"{result.tokens_seen:,} tokens in {result.elapsed_s:.1f} s"
    )
    print(
        f"checkpoint {result.checkpoint}; log {result.log_path}"
        + (f"; plot {result.plot_path}" if result.plot_path else "")
    )
    return EXIT_INTERRUPTED if result.interrupted else 0


def _describe_model(config: TrainConfig) -> str:
    from lmspec.reference.accounting import count_parameters

    m = config.model
    return (
        f"a {m.num_layers}-layer d_model={m.d_model} TransformerLM "
        f"({count_parameters(m) / 1e6:.2f}M parameters, vocab {m.vocab_size:,})"
    )


def run_generate(args: argparse.Namespace) -> int:
    import torch

    from lmspec.reference.generation import generate
    from lmspec.reference.training.data import resolve_device

    _check_generate_args(args)
    device = resolve_device(args.device)
    specials = _special_tokens(args)
    tokenizer = _load_tokenizer(args.tokenizer, specials)
    model = _load_model(args.checkpoint, tokenizer.vocab_size, device)
    eos_id = tokenizer.special_token_ids.get(args.eos_token) if args.eos_token else None
    if args.eos_token and eos_id is None:
        raise UsageError(f"--eos-token {args.eos_token!r} is not one of the special tokens {specials}")
    prompt_ids = tokenizer.encode(args.prompt)
    if not prompt_ids:
        if eos_id is None:
            raise UsageError("an empty --prompt needs an --eos-token to start from")
        prompt_ids = [eos_id]
    generator = torch.Generator(device=device).manual_seed(args.seed)
    started = time.perf_counter()
    new_ids = generate(
        model,
        prompt_ids,
        args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        eos_token_id=eos_id,
        generator=generator,
    )
    seconds = time.perf_counter() - started
    text = tokenizer.decode(new_ids)
    print((args.prompt if args.echo else "") + text)
    stop = "end-of-text" if eos_id is not None and new_ids and new_ids[-1] == eos_id else "max-new-tokens"
    print(
        f"[{len(new_ids)} tokens in {seconds:.2f} s, stopped at {stop}; prompt {len(prompt_ids)} "
        f"tokens; temperature {args.temperature}, top-p {args.top_p}, seed {args.seed}]",
        file=sys.stderr,
    )
    return 0


def _check_generate_args(args: argparse.Namespace) -> None:
    """Sampling settings in range; ``--threads`` applied."""
    if args.max_new_tokens < 0:
        raise UsageError(f"--max-new-tokens ({args.max_new_tokens}) must be >= 0")
    if not args.temperature >= 0:
        raise UsageError(f"--temperature ({args.temperature}) must be >= 0")
    if not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p ({args.top_p}) must be in (0, 1]")
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads ({args.threads}) must be >= 1")
        import torch

        torch.set_num_threads(args.threads)


def _load_model(checkpoint: Path, tokenizer_vocab_size: int, device: Any) -> Any:
    """The TransformerLM a ``train`` checkpoint holds (its config is in the metadata), in eval mode."""
    from lmspec.reference.nn import ModelConfig, TransformerLM
    from lmspec.reference.training.checkpoint import read_checkpoint

    payload = read_checkpoint(checkpoint)
    model_dict = ((payload.get("metadata") or {}).get("config") or {}).get("model")
    if not isinstance(model_dict, dict):
        raise ValueError(
            f"checkpoint {str(checkpoint)!r} has no model config in its metadata "
            "(it was not written by `train`), so the model cannot be rebuilt"
        )
    config = ModelConfig(**model_dict)
    if tokenizer_vocab_size > config.vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer_vocab_size:,} ids but the model only "
            f"{config.vocab_size:,}: wrong --tokenizer for this checkpoint?"
        )
    model = TransformerLM(config, device=device)
    model.load_state_dict(payload["model"])
    model.eval()
    return model


def _bars(args: argparse.Namespace) -> bool:
    """Progress bars only on a terminal: in a log file their frames pile up."""
    return not args.no_progress and sys.stderr.isatty()


def _phase_lines(args: argparse.Namespace, command: str) -> Callable[[str], None] | None:
    """One line per phase on stderr where there are no bars (not a terminal)."""
    if args.no_progress or sys.stderr.isatty():
        return None
    return lambda phase: print(f"{command}: {phase}", file=sys.stderr, flush=True)


def _require_file(path: Path, what: str) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    if not path.is_file():
        raise IsADirectoryError(f"{what} {str(path)!r} is not a file")
