"""Benchmark 2: encoding throughput and ``encode_iterable`` memory.

Throughput (MB of UTF-8 text per second, one thread) of the reference
``Tokenizer.encode`` vs tiktoken vs Hugging Face ``tokenizers``, all three
built from the same vocabulary and merge ranks and checked to produce the
same ids: (a) GPT-2's files from ../shared/fixtures, (b) the reference's own
10k tokenizer trained on the stdlib corpus (saved by the BPE benchmark, or
trained here when absent). Each implementation runs in its own process with
``RAYON_NUM_THREADS=1``; every repeat encodes the whole text with a freshly
built tokenizer ("cold": the reference's and HF's pre-token caches start
empty). The reference's "warm" time is a second pass with the same instance,
and its "pre-tok" time is the special-token split plus the GPT-2 regex alone,
the part of ``encode`` that is not BPE merging or cache lookups.

Memory: peak extra RSS (VmHWM reset after setup) while ``encode_iterable``
with its defaults consumes a file's lines, at 5 MB, 50 MB and 200 MB (the
50 MB file four times), plus a tracemalloc run on 5 MB that separates the
transient peak from what stays allocated (the call's pre-token cache), and a
50 MB run with the throughput-first settings of ``encode_iterable_batches``
for contrast.
"""

import gc
import hashlib
import importlib.util
import json
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lmspec.tools.bench.bpe import GPT2_PATTERN
from lmspec.tools.bench.common import (
    EOT,
    emit,
    fixtures_dir,
    fmt_bytes,
    hwm_bytes,
    load_1min,
    markdown_table,
    reset_peak_rss,
    rss_now_bytes,
    run_worker,
    summary,
    verdict,
)
from lmspec.tools.bench.corpus import encode_text, stdlib_corpus

TARGET_FRACTION = 0.25  # reference >= 1/4 of tiktoken's single-thread throughput
MEMORY_TARGET = 1 << 20  # encode_iterable peak extra memory < 1 MB (we take MiB)
# encode_iterable_batches' throughput-first settings (encode_file), for contrast
# with encode_iterable's memory-bounded defaults.
BULK_SETTINGS = {"flush_chars": 1 << 16, "cache_entries": None}
IMPLS = tuple(
    impl
    for impl, module in (("ref", "regex"), ("tiktoken", "tiktoken"), ("hf", "tokenizers"))
    if importlib.util.find_spec(module) is not None
)


# --- building the three tokenizers from one vocab.json / merges.txt ----------------
def _printable_files(vocab_path: str, merges_path: str) -> tuple[dict[str, int], list[str]]:
    vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    lines = Path(merges_path).read_text(encoding="utf-8").split("\n")
    merges = [ln for i, ln in enumerate(lines) if ln and not (i == 0 and ln.startswith("#"))]
    return vocab, merges


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable character -> byte (kept here: importing ``reference`` imports torch)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    mapping = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            mapping[chr(256 + extra)] = b
            extra += 1
    return mapping


def _read_vocab_bytes(vocab_path: str) -> dict[bytes, int]:
    decode = _byte_decoder()
    vocab = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    return {bytes(decode[c] for c in token): i for token, i in vocab.items()}


def build(impl: str, vocab_path: str, merges_path: str) -> Any:
    """A tokenizer object of ``impl`` with the given ranks and ``<|endoftext|>``."""
    if impl == "ref":
        from lmspec.reference.tokenizer import Tokenizer

        return Tokenizer.from_files(vocab_path, merges_path, [EOT])
    if impl == "tiktoken":
        import tiktoken

        vocab = _read_vocab_bytes(vocab_path)
        special = {t.decode(): i for t, i in vocab.items() if t == EOT.encode()}
        # ranks = ids: bytes first, then merges in merge order (GPT-2 and reference files)
        ranks = {t: i for t, i in vocab.items() if t != EOT.encode()}
        return tiktoken.Encoding("bench", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special)
    if impl == "hf":
        from tokenizers import AddedToken, Tokenizer, models

        from lmspec.tools.bench.bpe import _hf_tokenizer

        vocab, merges = _printable_files(vocab_path, merges_path)
        pairs = [tuple(m.split(" ")) for m in merges]
        tok = _hf_tokenizer()
        tok.model = models.BPE(vocab=vocab, merges=pairs)
        tok.add_special_tokens([AddedToken(EOT, special=True, normalized=False)])
        return tok
    raise ValueError(f"unknown impl {impl!r}")


def encode_with(impl: str, tok: Any, text: str) -> list[int]:
    if impl == "ref":
        return tok.encode(text)
    if impl == "tiktoken":
        return tok.encode(text, allowed_special={EOT})
    return tok.encode(text, add_special_tokens=False).ids


def _digest(ids: list[int]) -> str:
    return hashlib.sha256(array("I", ids).tobytes()).hexdigest()[:16]


# --- worker side -------------------------------------------------------------
def worker_encode(args: dict[str, Any]) -> None:
    impl = args["impl"]
    text = Path(args["text"]).read_text(encoding="utf-8")
    build(impl, args["vocab"], args["merges"])  # imports outside the timed region
    build_s, cold_s, warm_s, pretok_s = [], [], [], []
    ids: list[int] = []
    for _ in range(args["repeats"]):
        t0 = time.perf_counter()
        tok = build(impl, args["vocab"], args["merges"])
        t1 = time.perf_counter()
        ids = encode_with(impl, tok, text)
        t2 = time.perf_counter()
        build_s.append(t1 - t0)
        cold_s.append(t2 - t1)
        if impl == "ref":
            t3 = time.perf_counter()
            encode_with(impl, tok, text)
            warm_s.append(time.perf_counter() - t3)
            pretok_s.append(_ref_pretokenize_seconds(text))
        del tok
    result: dict[str, Any] = {
        "build_s": summary(build_s),
        "cold_s": summary(cold_s),
        "tokens": len(ids),
        "ids_sha": _digest(ids),
        "bytes": len(text.encode("utf-8")),
    }
    if warm_s:
        result["warm_s"] = summary(warm_s)
        result["pretok_s"] = summary(pretok_s)
    emit(result)


def _ref_pretokenize_seconds(text: str) -> float:
    """The special-token split + GPT-2 regex work of ``Tokenizer.encode``, nothing else."""
    from lmspec.reference.tokenizer.pretokenize import GPT2_REGEX, special_token_regex

    pattern = special_token_regex([EOT])
    t0 = time.perf_counter()
    n = 0
    for segment in pattern.split(text):
        n += len(GPT2_REGEX.findall(segment))
    return time.perf_counter() - t0


def worker_stream_memory(args: dict[str, Any]) -> None:
    """Peak extra RSS (or the tracemalloc peak) while ``encode_iterable`` consumes a
    file's lines ``passes`` times over, ids counted and dropped."""
    from lmspec.reference.tokenizer import Tokenizer

    tok = Tokenizer.from_files(args["vocab"], args["merges"], [EOT])
    settings = BULK_SETTINGS if args["settings"] == "bulk" else {}
    tracing = args["mode"] == "tracemalloc"
    result: dict[str, Any] = {"mode": args["mode"]}

    def lines() -> Iterator[str]:
        for _ in range(args["passes"]):
            with open(args["path"], encoding="utf-8", newline="") as f:
                yield from f

    gc.collect()
    if tracing:
        import tracemalloc

        tracemalloc.start()
    base = rss_now_bytes()
    result["hwm_reset"] = reset_peak_rss()
    tokens = 0
    t0 = time.perf_counter()
    for _ in tok.encode_iterable(lines(), **settings):
        tokens += 1
    seconds = time.perf_counter() - t0
    result["extra_rss_bytes"] = hwm_bytes() - base if result["hwm_reset"] else None
    if tracing:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result["traced_peak_bytes"] = peak
        result["traced_end_bytes"] = current
    result.update(seconds=seconds, tokens=tokens, base_rss_bytes=base)
    emit(result)


# --- parent side -------------------------------------------------------------
def own_tokenizer(own_dir: Path, cache: Path, *, quick: bool, log: Any) -> Path:
    """The reference's own tokenizer (vocab.json/merges.txt), trained here when missing."""
    if (own_dir / "merges.txt").is_file():
        return own_dir
    size, vocab = (300_000, 400) if quick else (50_000_000, 10_000)
    log(f"encode: training the reference tokenizer (vocab {vocab}) for benchmark 2b")
    run_worker(
        "bpe_ref",
        {
            "path": str(stdlib_corpus(size, cache)),
            "vocab_size": vocab,
            "workers": None,
            "merge": True,
            "save": str(own_dir),
        },
    )
    return own_dir


def run(out: Path, cache: Path, *, quick: bool, log: Any, own_tokenizer_dir: Path) -> dict[str, Any]:
    text_bytes = 200_000 if quick else 4_000_000
    repeats = 1 if quick else 5
    text = encode_text(text_bytes, cache)
    tokenizers: dict[str, tuple[str, str]] = {}
    fx = fixtures_dir()
    if fx is not None and not quick:
        tokenizers["gpt2"] = (str(fx / "gpt2_vocab.json"), str(fx / "gpt2_merges.txt"))
    elif fx is None:
        log("encode: ../shared/fixtures absent: GPT-2 rows skipped")
    own = own_tokenizer(own_tokenizer_dir, cache, quick=quick, log=log)
    tokenizers["own"] = (str(own / "vocab.json"), str(own / "merges.txt"))

    results: dict[str, Any] = {
        "text": str(text),
        "text_bytes": text_bytes,
        "repeats": repeats,
        "throughput": {},
        "memory": [],
        "load_before": load_1min(),
    }
    for name, (vocab, merges) in tokenizers.items():
        log(f"encode: {name} tokenizer on {fmt_bytes(text_bytes)} x{repeats}")
        results["throughput"][name] = _throughput_rows(vocab, merges, text, repeats)
    results["memory"] = [_memory_row(plan, tokenizers["own"], cache, log) for plan in _memory_plans(quick)]
    results["load_after"] = load_1min()
    return results


def _throughput_rows(vocab: str, merges: str, text: Path, repeats: int) -> dict[str, Any]:
    """Each implementation's encoding of ``text`` on one thread: MB/s, the same ids as the reference."""
    single = {"RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows = {}
    for impl in IMPLS:
        args = {"impl": impl, "vocab": vocab, "merges": merges, "text": str(text)}
        rows[impl] = run_worker("encode", {**args, "repeats": repeats}, env=single)
    mb = rows["ref"]["bytes"] / 1e6
    for row in rows.values():
        row["mb_per_s"] = mb / row["cold_s"]["median"]
        row["same_ids_as_ref"] = row["ids_sha"] == rows["ref"]["ids_sha"]
    ref = rows["ref"]
    ref["warm_mb_per_s"] = mb / ref["warm_s"]["median"]
    ref["pretok_fraction"] = ref["pretok_s"]["median"] / ref["cold_s"]["median"]
    if "tiktoken" in rows:
        ratio = rows["ref"]["mb_per_s"] / rows["tiktoken"]["mb_per_s"]
        rows["ratio_ref_over_tiktoken"] = ratio
        rows["target_met"] = ratio >= TARGET_FRACTION
    return rows


def _memory_plans(quick: bool) -> list[dict[str, Any]]:
    """The own tokenizer (trained on this very text) streamed line by line, with
    encode_iterable's defaults; the longest stream is the 50 MB file read 4 times.
    One run each: peak memory does not vary with load as times do."""
    if quick:
        return [{"size": 300_000, "mode": "rss"}]
    return [
        {"size": 5_000_000, "mode": "rss"},
        {"size": 50_000_000, "mode": "rss"},
        {"size": 50_000_000, "passes": 4, "mode": "rss"},
        {"size": 5_000_000, "mode": "tracemalloc"},
        {"size": 50_000_000, "mode": "rss", "settings": "bulk"},
    ]


def _memory_row(plan: dict[str, Any], own: tuple[str, str], cache: Path, log: Any) -> dict[str, Any]:
    passes, settings = plan.get("passes", 1), plan.get("settings", "defaults")
    path = stdlib_corpus(plan["size"], cache)
    stream_bytes = passes * plan["size"]
    log(f"encode: encode_iterable memory, {fmt_bytes(stream_bytes)} stream, {plan['mode']}, {settings}")
    args = {"vocab": own[0], "merges": own[1], "path": str(path)}
    run = run_worker("stream_memory", {**args, "mode": plan["mode"], "passes": passes, "settings": settings})
    row = {"stream_bytes": stream_bytes, "mode": plan["mode"], "settings": settings}
    for key in ("extra_rss_bytes", "traced_peak_bytes", "traced_end_bytes", "seconds", "tokens"):
        row[key] = run.get(key)
    row["mb_per_s"] = stream_bytes / 1e6 / row["seconds"]
    # tracemalloc's own bookkeeping inflates RSS: judge traced runs by their trace
    measured = row["traced_peak_bytes"] if plan["mode"] == "tracemalloc" else row["extra_rss_bytes"]
    row["target_met"] = None if measured is None or settings == "bulk" else measured < MEMORY_TARGET
    return row


def tables(results: dict[str, Any]) -> str:
    rows = []
    for name, r in results["throughput"].items():
        for impl in IMPLS:
            row = r[impl]
            extra = ""
            if impl == "ref":
                extra = f"warm {row['warm_mb_per_s']:.2f} MB/s; pre-tok {100 * row['pretok_fraction']:.0f}% of cold"
            rows.append(
                [
                    name,
                    impl,
                    f"{row['mb_per_s']:.2f}",
                    f"{row['tokens']:,}",
                    "yes" if row["same_ids_as_ref"] else "NO",
                    f"{row['build_s']['median']:.2f} s",
                    extra,
                ]
            )
        if "ratio_ref_over_tiktoken" not in r:
            continue
        rows.append(
            [
                name,
                "ref / tiktoken",
                f"{r['ratio_ref_over_tiktoken']:.2f}x",
                "",
                "",
                "",
                f"target >= {TARGET_FRACTION}: {verdict(r['target_met'])}",
            ]
        )
    text = markdown_table(
        ["tokenizer", "impl", "MB/s (cold, 1 thread)", "tokens", "same ids", "build", "notes"],
        rows,
    )
    settings_label = {
        "defaults": "encode_iterable defaults",
        "bulk": "bulk: " + ", ".join(f"{k}={v}" for k, v in BULK_SETTINGS.items()),
    }
    mem_rows = [
        [
            fmt_bytes(m["stream_bytes"]),
            f"{m['mode']}, {settings_label[m['settings']]}",
            fmt_bytes(m.get("extra_rss_bytes")),
            fmt_bytes(m.get("traced_peak_bytes")),
            fmt_bytes(m.get("traced_end_bytes")),
            f"{m['mb_per_s']:.2f}",
            verdict(m["target_met"]) if m["settings"] != "bulk" else "-",
        ]
        for m in results["memory"]
    ]
    headers = ["stream", "measure", "peak extra RSS", "traced peak", "traced at end", "MB/s", "target < 1 MiB"]
    text += "\n\n" + markdown_table(headers, mem_rows)
    return text
