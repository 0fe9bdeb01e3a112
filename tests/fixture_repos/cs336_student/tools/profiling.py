"""Timing helpers. I wrap the slow parts of BPE training with `timer` and turn
on the log level when I want to see where the time goes."""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("cs336.timing")


@contextmanager
def timer(name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        logger.debug("%s took %.3fs", name, elapsed)
