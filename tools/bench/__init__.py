"""lmspec benchmarks: the reference against the tools users would otherwise pick.

``python -m tools.bench [--quick] [--only bpe,encode,train,suite] [--out bench-out/]``
(``nox -s bench``); results and their interpretation are in BENCHMARKS.md.

Modules: ``bpe`` (BPE training vs Hugging Face tokenizers), ``encode``
(throughput vs tiktoken and HF, ``encode_iterable`` memory), ``train``
(training-step throughput vs ``torch_native``), ``suite`` (wall time of the
conformance suite, meta-tests and grader), ``corpus`` (the deterministic
stdlib corpus), ``worker`` (one measurement per subprocess), ``common``.
"""
