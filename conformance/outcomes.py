"""Named outcomes shared by the judge's report and the grader."""

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


class Fault(enum.StrEnum):
    """How a call into the worker went wrong, beside the implementation
    raising an exception (which is just a failure)."""

    TIMEOUT = "timeout"  # no answer within the per-call limit: the worker was killed
    CRASH = "crash"  # the worker died during the call
    PROTOCOL = "protocol"  # the worker answered something that is not the protocol
    LOAD = "load"  # the implementation could not be imported or started

    @property
    def outcome(self) -> Outcome:
        return Outcome.TIMEOUT if self is Fault.TIMEOUT else Outcome.ERROR
