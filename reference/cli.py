"""Command line: ``python -m reference train-bpe | encode | train | generate``.

End to end (README.md, "Train a tiny language model end to end", has a measured run)::

    python -m reference train-bpe corpus.txt --vocab-size 2000 --out-dir tok
    python -m reference encode corpus.txt --tokenizer tok --output data/train.npy \\
        --val-fraction 0.1 --val-output data/val.npy
    python -m reference train --train-data data/train.npy --val-data data/val.npy \\
        --vocab-size 2000 --context-length 128 --d-model 128 --num-layers 2 \\
        --num-heads 4 --d-ff 384 --steps 1000 --out-dir runs/small
    python -m reference generate --checkpoint runs/small/checkpoint.pt --tokenizer tok \\
        --prompt "The" --temperature 0.8 --top-p 0.9

Every option is listed with its default by ``--help``. Bad input (a missing
file, an invalid hyperparameter, an unusable device) prints one
``error: ...`` line on stderr and exits with status 2; Ctrl-C exits with 130
(``train`` saves a checkpoint first).
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
import typing
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from lmspec.reference.training.config import MODEL_HELP, ConfigError, TrainConfig, default_model

__all__ = ["main"]

PROG = "python -m reference"
EOT = "<|endoftext|>"
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" unless the default is None/SUPPRESS/False or already stated."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        quiet = action.default is None or action.default is False or action.required
        if quiet or action.default is argparse.SUPPRESS or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) raised as UsageError."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Run one subcommand; return the exit status (0 ok, 2 bad input, 130 interrupted).
    ``prog``: the program name the user typed (``lmspec`` from the lmspec command)."""
    parser = _build_parser(prog)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return _dispatch(parser, argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UsageError, ConfigError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        return _fail(exc)
    except FloatingPointError as exc:  # a diverged run (its last good state is saved)
        return _fail(exc)
    except ValueError as exc:  # bad data, device, checkpoint (CheckpointError...)
        return _fail(exc)


def _dispatch(parser: "_Parser", argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    return args.run(args)


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings as one ``warning: ...`` line (no source line: it would point into wrappers)."""
    print(f"warning: {message}", file=sys.stderr)


def _fail(exc: BaseException) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


# --- parser ------------------------------------------------------------------------


def _build_parser(prog: str = PROG) -> _Parser:
    parser = _Parser(
        prog=prog,
        description="lmspec reference: train a BPE tokenizer, encode text, train and sample a "
        "Transformer LM (SPEC §1, §3, §4).",
    )
    parser.set_defaults(command=None)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    _add_train_bpe(sub)
    _add_encode(sub)
    _add_train(sub)
    _add_generate(sub)
    return parser


def _subparser(sub: Any, name: str, summary: str, run: Callable[[argparse.Namespace], int]) -> _Parser:
    p = sub.add_parser(
        name,
        help=summary,
        description=summary,
        formatter_class=_HelpFormatter,
    )
    p.set_defaults(command=name, run=run)
    return p


def _add_special_tokens(p: _Parser) -> None:
    p.add_argument(
        "--special-token",
        dest="special_tokens",
        action="append",
        metavar="TOKEN",
        help=f"special token (repeatable; default: {EOT})",
    )
    p.add_argument("--no-special-tokens", action="store_true", help="use no special tokens at all")


def _special_tokens(args: argparse.Namespace) -> list[str]:
    if args.no_special_tokens:
        if args.special_tokens:
            raise UsageError("--special-token and --no-special-tokens contradict each other")
        return []
    return args.special_tokens or [EOT]


def _add_train_bpe(sub: Any) -> None:
    p = _subparser(sub, "train-bpe", "Train a byte-level BPE tokenizer on a text file.", _run_train_bpe)
    p.add_argument("input", type=Path, help="UTF-8 training text")
    p.add_argument("--vocab-size", type=int, required=True, metavar="N", help="bytes + special tokens + merges")
    p.add_argument(
        "--out-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="writes OUT_DIR/vocab.json and merges.txt",
    )
    _add_special_tokens(p)
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="pre-tokenization processes (default: CPUs)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_encode(sub: Any) -> None:
    p = _subparser(sub, "encode", "Encode a text file into a memory-mappable .npy of token ids.", _run_encode)
    p.add_argument("input", type=Path, help="UTF-8 text to encode")
    p.add_argument(
        "--tokenizer",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory with vocab.json and merges.txt",
    )
    p.add_argument(
        "--output",
        type=Path,
        required=True,
        metavar="NPY",
        help="token .npy (the train part with --val-fraction)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="fraction of the tokens to split off as validation data, cut at a document boundary",
    )
    p.add_argument(
        "--val-output",
        type=Path,
        default=None,
        metavar="NPY",
        help="validation .npy (with --val-fraction)",
    )
    p.add_argument(
        "--doc-separator",
        default=EOT,
        metavar="TOKEN",
        help="special token that ends a document (for the split)",
    )
    _add_special_tokens(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_generate(sub: Any) -> None:
    p = _subparser(sub, "generate", "Sample a completion from a trained checkpoint.", _run_generate)
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        metavar="PATH",
        help="checkpoint written by `train`",
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        required=True,
        metavar="DIR",
        help="directory with vocab.json and merges.txt",
    )
    p.add_argument(
        "--prompt",
        default="",
        metavar="TEXT",
        help="prompt text (empty: start after a document separator)",
    )
    p.add_argument("--max-new-tokens", type=int, default=200, metavar="N", help="most tokens to generate")
    p.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        metavar="T",
        help="softmax temperature (0: greedy)",
    )
    p.add_argument("--top-p", type=float, default=0.9, metavar="P", help="nucleus sampling mass in (0, 1]")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed")
    p.add_argument("--device", default="cpu", metavar="DEVICE", help="torch device")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch CPU threads (default: one per core)",
    )
    p.add_argument(
        "--eos-token",
        default=EOT,
        metavar="TOKEN",
        help="stop after this special token ('' never stops)",
    )
    p.add_argument("--echo", action="store_true", help="print the prompt before the completion")
    _add_special_tokens(p)


# train: one flag per TrainConfig / ModelConfig field, generated from the dataclasses
_MODEL_FLAG_NAMES = {"eps": "rmsnorm-eps"}  # "--eps" is AdamW's


def _add_train(sub: Any) -> None:
    p = _subparser(
        sub,
        "train",
        "Train a Transformer LM on .npy token arrays (flags override --config).",
        _run_train,
    )
    # Defaults live in TrainConfig (shown in each help text); argparse's are SUPPRESS.
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="JSON or TOML config file (keys as the flags, model keys under 'model')",
    )
    p.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (evaluation lines are still printed)",
    )
    hints = typing.get_type_hints(TrainConfig)
    defaults = TrainConfig(train_data="-")
    run = p.add_argument_group("data, run and checkpoints")
    optim = p.add_argument_group("optimization (steps, batch, AdamW, schedule, clipping)")
    optim_fields = {
        "lr",
        "min_lr",
        "warmup_iters",
        "cosine_cycle_iters",
        "betas",
        "eps",
        "weight_decay",
        "max_grad_norm",
        "batch_size",
        "steps",
    }
    for f in dataclasses.fields(TrainConfig):
        if f.name == "model":
            continue
        default = "required" if f.name == "train_data" else getattr(defaults, f.name)
        group = optim if f.name in optim_fields else run
        _add_field_flag(group, f.name, f.name.replace("_", "-"), hints[f.name], f.metadata["help"], default)
    model = p.add_argument_group("model (TransformerLM shape)")
    model_hints = typing.get_type_hints(type(default_model()))
    for f in dataclasses.fields(default_model()):
        flag = _MODEL_FLAG_NAMES.get(f.name, f.name.replace("_", "-"))
        _add_field_flag(
            model,
            f"model.{f.name}",
            flag,
            model_hints[f.name],
            MODEL_HELP.get(f.name, f.name),
            getattr(default_model(), f.name),
        )


def _add_field_flag(group: Any, dest: str, flag: str, tp: Any, help_text: str, default: Any) -> None:
    shown = "none" if default is None else (" ".join(map(str, default)) if isinstance(default, tuple) else default)
    help_text = f"{help_text} (default: {shown})"
    options = typing.get_args(tp) or (tp,)
    if tp is bool:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=argparse.SUPPRESS,
            help=help_text,
        )
        return
    if typing.get_origin(tp) is tuple:
        group.add_argument(
            f"--{flag}",
            dest=dest,
            type=float,
            nargs=len(typing.get_args(tp)),
            metavar=tuple(f"B{i + 1}" for i in range(len(typing.get_args(tp)))),
            default=argparse.SUPPRESS,
            help=help_text,
        )
        return
    base = next(o for o in options if o is not type(None))
    convert = _nullable(base) if type(None) in options else base
    metavar = _METAVARS.get(flag) or {int: "N", float: "X"}.get(base, "VALUE")
    group.add_argument(
        f"--{flag}",
        dest=dest,
        type=convert,
        default=argparse.SUPPRESS,
        metavar=metavar,
        help=help_text,
    )


_METAVARS = {
    "train-data": "NPY",
    "val-data": "NPY",
    "out-dir": "DIR",
    "checkpoint": "PATH",
    "resume": "PATH|auto",
    "device": "DEVICE",
    "dtype": "{float32,bfloat16}",
    "norm": "{pre,post,none}",
    "ffn": "{swiglu,silu}",
}


def _nullable(base: type) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        return None if text.lower() in ("none", "null") else base(text)

    convert.__name__ = base.__name__  # argparse names the type in "invalid int value"
    return convert


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


def _run_train_bpe(args: argparse.Namespace) -> int:
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


def _run_encode(args: argparse.Namespace) -> int:
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


def _run_train(args: argparse.Namespace) -> int:
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


def _run_generate(args: argparse.Namespace) -> int:
    import torch

    from lmspec.reference.generation import generate
    from lmspec.reference.nn import ModelConfig, TransformerLM
    from lmspec.reference.training.checkpoint import read_checkpoint
    from lmspec.reference.training.data import resolve_device

    if args.max_new_tokens < 0:
        raise UsageError(f"--max-new-tokens ({args.max_new_tokens}) must be >= 0")
    if not args.temperature >= 0:
        raise UsageError(f"--temperature ({args.temperature}) must be >= 0")
    if not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p ({args.top_p}) must be in (0, 1]")
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads ({args.threads}) must be >= 1")
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    specials = _special_tokens(args)
    tokenizer = _load_tokenizer(args.tokenizer, specials)
    payload = read_checkpoint(args.checkpoint)
    model_dict = ((payload.get("metadata") or {}).get("config") or {}).get("model")
    if not isinstance(model_dict, dict):
        raise ValueError(
            f"checkpoint {str(args.checkpoint)!r} has no model config in its metadata "
            "(it was not written by `train`), so the model cannot be rebuilt"
        )
    config = ModelConfig(**model_dict)
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocab_size:,} ids but the model only "
            f"{config.vocab_size:,}: wrong --tokenizer for this checkpoint?"
        )
    model = TransformerLM(config, device=device)
    model.load_state_dict(payload["model"])
    model.eval()
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
