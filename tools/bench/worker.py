"""Subprocess entry point: ``python -m tools.bench.worker TASK JSON_ARGS``.

Runs one measurement and prints its result as one JSON line (``common.emit``).
Imports only what TASK needs, so environment switches set by the parent
(``JAXTYPING_DISABLE``, ``RAYON_NUM_THREADS``) apply to a clean interpreter.
"""

import json
import sys


def main(argv: list[str]) -> None:
    task, args = argv[0], json.loads(argv[1])
    if task == "bpe_ref":
        from lmspec.tools.bench.bpe import worker_ref as run
    elif task == "bpe_hf":
        from lmspec.tools.bench.bpe import worker_hf as run
    elif task == "encode":
        from lmspec.tools.bench.encode import worker_encode as run
    elif task == "stream_memory":
        from lmspec.tools.bench.encode import worker_stream_memory as run
    elif task == "train":
        from lmspec.tools.bench.train import worker_train as run
    else:
        raise SystemExit(f"unknown benchmark task {task!r}")
    run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
