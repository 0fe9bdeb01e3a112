"""Benchmark 1: BPE training, reference ``train_bpe`` vs Hugging Face ``tokenizers``.

Each repeat is a fresh process (peak RSS per measurement). Phases:

- reference: ``count_file_pretokens`` (pre-tokenization + counting, in
  ``num_workers`` processes) and ``train_bpe_from_counts`` (the merge loop,
  always one process) are timed separately; ``train_bpe`` is exactly the two
  in sequence.
- Hugging Face: one ``Tokenizer.train`` call cannot be split, so its
  pre-tokenization phase is measured as a training run to vocab 257 (256
  byte-level alphabet + the special token: reads, pre-tokenizes and counts,
  makes no merge); merges = total - that.

Single process vs all cores: reference ``num_workers=1`` vs ``os.cpu_count()``;
HF ``RAYON_NUM_THREADS=1`` vs unset (rayon's default: one thread per core).
CPU seconds (user+sys of the process and its reaped children) are recorded
with the wall times: under load from other processes they are the steadier
number.
"""

import hashlib
import importlib.util
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from lmspec.conformance.fixtures import sha256_file
from lmspec.tools.bench.common import (
    EOT,
    emit,
    fixtures_dir,
    fmt_bytes,
    fmt_peak,
    fmt_s,
    load_1min,
    markdown_table,
    rss_now_bytes,
    run_worker,
    summary,
    verdict,
)
from lmspec.tools.bench.corpus import stdlib_corpus

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TARGET_RATIO = 3.0  # reference wall time within 3x of HF at the same core count


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _merges_digest(merges: list[tuple[bytes, bytes]]) -> str:
    digest = hashlib.sha256()
    for a, b in merges:
        digest.update(len(a).to_bytes(4, "little") + a + len(b).to_bytes(4, "little") + b)
    return digest.hexdigest()[:16]


# --- worker side -------------------------------------------------------------
def worker_ref(args: dict[str, Any]) -> None:
    """``repeats`` x (count phase [+ merge phase]) in this process; lists of values."""
    from lmspec.reference.tokenizer import count_file_pretokens, train_bpe_from_counts

    specials = [EOT]
    result: dict[str, Any] = {"count_s": [], "count_cpu_s": [], "merge_s": [], "merge_cpu_s": []}
    result["base_rss_bytes"] = rss_now_bytes()
    for i in range(args.get("repeats", 1)):
        t0, c0 = time.perf_counter(), _cpu_seconds()
        counts = count_file_pretokens(args["path"], specials, num_workers=args["workers"])
        t1, c1 = time.perf_counter(), _cpu_seconds()
        result["count_s"].append(t1 - t0)
        result["count_cpu_s"].append(c1 - c0)
        result["distinct_pretokens"] = len(counts)
        if not args.get("merge", True):
            continue
        vocab, merges = train_bpe_from_counts(counts, args["vocab_size"], specials)
        t2, c2 = time.perf_counter(), _cpu_seconds()
        result["merge_s"].append(t2 - t1)
        result["merge_cpu_s"].append(c2 - c1)
        result.update(merges=len(merges), merges_sha=_merges_digest(merges))
        if args.get("save") and i == 0:
            from lmspec.reference.tokenizer import save_vocab_merges

            save = Path(args["save"])
            save.mkdir(parents=True, exist_ok=True)
            save_vocab_merges(vocab, merges, save / "vocab.json", save / "merges.txt")
        del vocab, merges
    emit({k: v for k, v in result.items() if v != []})


def _hf_tokenizer() -> Any:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    return tok


def worker_hf(args: dict[str, Any]) -> None:
    """``repeats`` x ``Tokenizer.train`` with a fresh tokenizer and trainer each time."""
    from tokenizers import pre_tokenizers, trainers

    result: dict[str, Any] = {"train_s": [], "train_cpu_s": []}
    result["base_rss_bytes"] = rss_now_bytes()
    for i in range(args.get("repeats", 1)):
        tok = _hf_tokenizer()
        trainer = trainers.BpeTrainer(
            vocab_size=args["vocab_size"],
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        t0, c0 = time.perf_counter(), _cpu_seconds()
        tok.train([args["path"]], trainer)
        t1, c1 = time.perf_counter(), _cpu_seconds()
        result["train_s"].append(t1 - t0)
        result["train_cpu_s"].append(c1 - c0)
        result["vocab"] = tok.get_vocab_size()
        if args.get("save") and i == 0:
            tok.save(args["save"])
    emit(result)


# --- parent side -------------------------------------------------------------
def _hf_merges(path: Path) -> list[tuple[bytes, bytes]]:
    from lmspec.reference.tokenizer import printable_to_bytes

    merges = json.loads(path.read_text(encoding="utf-8"))["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return [(printable_to_bytes(a), printable_to_bytes(b)) for a, b in pairs]


def _agreement(ref_dir: Path, hf_json: Path) -> dict[str, Any]:
    """How far the two trainers agree: common merge prefix and shared learned tokens."""
    from lmspec.reference.tokenizer.files import load_merges

    ref = load_merges(ref_dir / "merges.txt")
    hf = _hf_merges(hf_json)
    prefix = 0
    for a, b in zip(ref, hf):
        if a != b:
            break
        prefix += 1
    ref_tokens = {a + b for a, b in ref}
    hf_tokens = {a + b for a, b in hf}
    return {
        "ref_merges": len(ref),
        "hf_merges": len(hf),
        "common_prefix": prefix,
        "shared_tokens": len(ref_tokens & hf_tokens),
    }


def _measure(
    task: str, args: dict[str, Any], repeats: int, *, fresh: bool, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``repeats`` runs: one process each (``fresh``) or all in one process."""
    if fresh:
        runs = [
            run_worker(task, {**args, "save": args.get("save") if i == 0 else None}, env=env) for i in range(repeats)
        ]
    else:
        runs = [run_worker(task, {**args, "repeats": repeats}, env=env)]
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, list):
            out[key] = summary([v for r in runs for v in r[key]])
        elif key in ("peak_rss_bytes", "children_peak_rss_bytes", "base_rss_bytes"):
            out[key] = max(r[key] for r in runs)
        elif key in ("distinct_pretokens", "merges", "merges_sha", "vocab"):
            out[key] = value
    out["processes"] = len(runs)
    return out


def plan(quick: bool, cache: Path, log: Any) -> list[tuple[str, Path, int, int]]:
    """(name, path, vocab_size, repeats) of the inputs."""
    inputs: list[tuple[str, Path, int, int]] = []
    fx = fixtures_dir()
    if quick:
        inputs.append(("stdlib-300KB", stdlib_corpus(300_000, cache), 400, 1))
        return inputs
    if fx is not None:
        inputs.append(("corpus.en", fx / "corpus.en", 500, 5))
    else:
        log("bpe: ../shared/fixtures absent: corpus.en row skipped")
    inputs.append(("stdlib-50MB", stdlib_corpus(50_000_000, cache), 10_000, 3))
    return inputs


def run(out: Path, cache: Path, *, quick: bool, log: Any, own_tokenizer_dir: Path) -> dict[str, Any]:
    """All BPE measurements; also saves the reference's tokenizer for the encode benchmark."""
    from lmspec.reference.tokenizer.counting import PARALLEL_MIN_BYTES

    cores = os.cpu_count() or 1
    results: dict[str, Any] = {"inputs": {}, "cores": cores, "notes": []}
    have_hf = importlib.util.find_spec("tokenizers") is not None
    if not have_hf:
        log("bpe: Hugging Face tokenizers not installed (pip install -e .[bench]): HF skipped")
        results["notes"].append("tokenizers not installed: Hugging Face rows skipped")
    for name, path, vocab_size, repeats in plan(quick, cache, log):
        size = path.stat().st_size
        log(f"bpe: {name} ({fmt_bytes(size)}), vocab {vocab_size}, x{repeats}")
        entry: dict[str, Any] = {
            "path": str(path),
            "bytes": size,
            "sha256": sha256_file(path),
            "vocab_size": vocab_size,
            "repeats": repeats,
            "load_before": load_1min(),
        }
        # small inputs: repeats inside one process (start-up would dominate);
        # large ones: a process per repeat, so each has its own peak RSS
        fresh = size >= PARALLEL_MIN_BYTES
        main_input = name.startswith("stdlib")
        save_ref = own_tokenizer_dir if main_input else out / "bpe" / f"ref-{name}"
        save_hf = out / "bpe" / f"hf-{name}.json"
        save_hf.parent.mkdir(parents=True, exist_ok=True)
        core_counts = [1] if quick else sorted({1, cores})
        base = {"path": str(path), "vocab_size": vocab_size}
        for workers in core_counts:
            if workers > 1 and size < PARALLEL_MIN_BYTES:
                entry[f"ref_w{workers}"] = entry["ref_w1"]
                results["notes"].append(
                    f"{name}: below PARALLEL_MIN_BYTES ({fmt_bytes(PARALLEL_MIN_BYTES)}), "
                    "train_bpe counts in-process whatever num_workers is"
                )
                continue
            # the merge loop is one process whatever num_workers is: with several
            # workers only the counting phase is measured again
            args = {**base, "workers": workers, "merge": workers == 1}
            if workers == 1:
                args["save"] = str(save_ref)
            entry[f"ref_w{workers}"] = _measure("bpe_ref", args, repeats, fresh=fresh)
        for threads in core_counts if have_hf else []:
            env = {"RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
            entry[f"hf_t{threads}"] = _measure("bpe_hf", {**base, "save": str(save_hf)}, repeats, fresh=fresh, env=env)
            # pre-tokenization alone: train to the 256-byte alphabet + the special
            pretok = {"path": str(path), "vocab_size": 256 + 1}
            entry[f"hf_pretok_t{threads}"] = _measure("bpe_hf", pretok, repeats, fresh=fresh, env=env)
        if have_hf:
            entry["agreement"] = _agreement(save_ref, save_hf)
        entry["load_after"] = load_1min()
        _derive(entry, core_counts)
        results["inputs"][name] = entry
    return results


HF_KEYS = (
    "hf_pretok_s",
    "hf_merge_s",
    "hf_total_s",
    "hf_total_cpu_s",
    "hf_peak_rss_bytes",
    "hf_base_rss_bytes",
    "ratio_ref_over_hf",
    "target_met",
)


def _derive(entry: dict[str, Any], core_counts: list[int]) -> None:
    """Totals, phase splits and the 3x target, single process and all cores."""
    merge = entry["ref_w1"]["merge_s"]["median"]
    merge_cpu = entry["ref_w1"]["merge_cpu_s"]["median"]
    derived = {}
    for workers in core_counts:
        label = "single" if workers == 1 else "all"
        ref = entry[f"ref_w{workers}"]
        ref_total = ref["count_s"]["median"] + merge
        derived[label] = {
            "cores": workers,
            "ref_count_s": ref["count_s"]["median"],
            "ref_merge_s": merge,
            "ref_total_s": ref_total,
            "ref_total_cpu_s": ref["count_cpu_s"]["median"] + merge_cpu,
            "ref_peak_rss_bytes": max(ref["peak_rss_bytes"], entry["ref_w1"]["peak_rss_bytes"]),
            "ref_base_rss_bytes": ref["base_rss_bytes"],
            "ref_worker_peak_rss_bytes": ref["children_peak_rss_bytes"],
        }
        hf = entry.get(f"hf_t{workers}")
        hf_pre = entry.get(f"hf_pretok_t{workers}")
        if hf is None or hf_pre is None:
            derived[label].update(dict.fromkeys(HF_KEYS))
            continue
        hf_total = hf["train_s"]["median"]
        ratio = ref_total / hf_total
        derived[label].update(
            hf_pretok_s=hf_pre["train_s"]["median"],
            hf_merge_s=max(hf_total - hf_pre["train_s"]["median"], 0.0),
            hf_total_s=hf_total,
            hf_total_cpu_s=hf["train_cpu_s"]["median"],
            hf_peak_rss_bytes=hf["peak_rss_bytes"],
            hf_base_rss_bytes=hf["base_rss_bytes"],
            ratio_ref_over_hf=ratio,
            target_met=ratio <= TARGET_RATIO,
        )
    entry["derived"] = derived


def tables(results: dict[str, Any]) -> str:
    rows = []
    for name, entry in results["inputs"].items():
        for d in entry["derived"].values():
            cores = d["cores"]
            rows.append(
                [
                    f"{name} @ {entry['vocab_size']}",
                    f"{cores}",
                    fmt_s(d["ref_count_s"]),
                    fmt_s(d["ref_merge_s"]),
                    fmt_s(d["ref_total_s"]),
                    fmt_s(d["ref_total_cpu_s"]),
                    fmt_peak(d["ref_peak_rss_bytes"], d["ref_base_rss_bytes"]),
                    fmt_s(d["hf_pretok_s"]),
                    fmt_s(d["hf_merge_s"]),
                    fmt_s(d["hf_total_s"]),
                    fmt_s(d["hf_total_cpu_s"]),
                    fmt_peak(d["hf_peak_rss_bytes"], d["hf_base_rss_bytes"]),
                    "-" if d["ratio_ref_over_hf"] is None else f"{d['ratio_ref_over_hf']:.2f}x",
                    verdict(d["target_met"]) if name.startswith("stdlib") else "-",
                ]
            )
    headers = [
        "input @ vocab",
        "cores",
        "ref pre-tok",
        "ref merges",
        "ref total",
        "ref CPU",
        "ref peak RSS",
        "HF pre-tok",
        "HF merges",
        "HF total",
        "HF CPU",
        "HF peak RSS",
        "ref/HF wall",
        f"target <= {TARGET_RATIO:.0f}x",
    ]
    text = markdown_table(headers, rows)
    notes = []
    for name, entry in results["inputs"].items():
        a = entry.get("agreement")
        if a is None:
            continue
        notes.append(
            f"- {name}: distinct pre-tokens {entry['ref_w1']['distinct_pretokens']:,}; "
            f"reference and HF share the first {a['common_prefix']} of {a['ref_merges']} "
            f"merges and {a['shared_tokens']} learned tokens; load {entry['load_before']:.1f} -> "
            f"{entry['load_after']:.1f}"
        )
    notes += [f"- {n}" for n in dict.fromkeys(results.get("notes", []))]
    return text + "\n\n" + "\n".join(notes)
