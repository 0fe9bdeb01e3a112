"""The lmspec grader: runs the judge (the conformance suite, which calls the
implementation through a sandboxed worker) and grades it per spec item.

    python -m tools.grade --adapter path/to/tests/adapters.py
    python -m tools.grade --batch submissions/ --jobs 4

Modules: ``cli`` (command line), ``grading`` (one implementation, end to
end; the judge process itself is started by conformance/judge/launch.py,
shared with the mutant and variant runners), ``repository``, ``pythons``
and ``envs``/``envstep`` (the submission's declared interpreter and
environment, built in a sandbox), ``results`` (statuses, points, STRICT,
trust), ``report``, ``outputs``, ``html``, ``gradescope`` (table, JSON,
JUnit, report.html, Gradescope), ``points`` (the points table and its
source), ``files`` (snapshot MANIFEST and suite-file guards), ``batch``,
``distributed``, ``archive``, ``dashboard`` (a folder of submissions on
Dask, and its dashboard), ``throughput`` (grading throughput measured).
docs/grading.md documents the output schema.
"""

__all__ = ["grade", "main"]


def __getattr__(name: str):
    if name == "grade":
        from lmspec.tools.grade.grading import grade

        return grade
    if name == "main":
        from lmspec.tools.grade.cli import main

        return main
    raise AttributeError(name)
