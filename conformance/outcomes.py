"""What happened to one test: the vocabulary the judge's report, the
grader's results and every output format share."""

import enum


class Outcome(enum.StrEnum):
    """What happened to one test."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # a crash of the worker, a fixture error, an import failure
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # for another reason: no CUDA, an --skips-file entry...
    NOT_CHECKED = "not_checked"  # an oracle file it needs was not found (the grade is incomplete)
    NOT_IMPLEMENTED = "not_implemented"  # core function missing or NotImplementedError
    NOT_PROVIDED = "not_provided"  # extended function missing


#: The start of the skip message of a test whose oracle file was not found.
NOT_CHECKED_PREFIX = "not checked:"
