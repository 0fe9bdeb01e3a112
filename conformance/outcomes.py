"""What happened to one test: the vocabulary the judge's report, the
grader's results and every output format share."""

import enum


class Outcome(enum.StrEnum):
    """What happened to one test."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # a crash of the worker, a fixture error, an import failure
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # for another reason: fixtures missing, no CUDA...
    NOT_IMPLEMENTED = "not_implemented"  # core function missing or NotImplementedError
    NOT_PROVIDED = "not_provided"  # extended function missing
