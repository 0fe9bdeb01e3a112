"""Command line: ``python -m reference train-bpe | encode | train | generate``.

End to end (docs/training.md, "Train a tiny language model end to end", has a measured run)::

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

This module builds the parser and dispatches; what each command does is in
reference/commands.py.
"""

import argparse
import dataclasses
import sys
import typing
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from lmspec.reference.commands import (
    EOT,
    EXIT_INTERRUPTED,
    UsageError,
    run_encode,
    run_generate,
    run_train,
    run_train_bpe,
)
from lmspec.reference.training.config import MODEL_HELP, ConfigError, TrainConfig, default_model

__all__ = ["main"]

PROG = "python -m reference"
EXIT_USAGE = 2


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


def _add_train_bpe(sub: Any) -> None:
    p = _subparser(sub, "train-bpe", "Train a byte-level BPE tokenizer on a text file.", run_train_bpe)
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
    p = _subparser(sub, "encode", "Encode a text file into a memory-mappable .npy of token ids.", run_encode)
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
    p = _subparser(sub, "generate", "Sample a completion from a trained checkpoint.", run_generate)
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
        run_train,
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
