"""The lmspec grader: runs the conformance suite on an implementation in
resource-limited child processes and grades it per spec item.

    python -m tools.grade --adapter path/to/tests/adapters.py
    python -m tools.grade --batch submissions/ --jobs 4

Modules: ``cli`` (command line), ``grading`` (one implementation, end to
end), ``batch`` (a folder of submissions), ``runner`` (the attempt loop:
crash recovery and per-test outcomes), ``child`` (one limited pytest process
and its watcher), ``stream`` (the pytest plugin inside the child),
``results`` (statuses, points, trust), ``report`` (table, JSON, JUnit,
Gradescope), ``points`` (the points table and its source), ``files``
(snapshot MANIFEST and suite-file guards). docs/grading.md documents the
output schema.
"""

__all__ = ["grade", "main"]


def __getattr__(name: str):
    # lazy: the child process imports tools.grade.stream and must not pay for the rest
    if name == "grade":
        from tools.grade.grading import grade

        return grade
    if name == "main":
        from tools.grade.cli import main

        return main
    raise AttributeError(name)
