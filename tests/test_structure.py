"""The arrows between lmspec's folders (docs/architecture.md): tools/ may
import conformance/ and reference/; conformance/ imports neither; reference/
imports neither; the sandboxed worker imports nothing of lmspec but itself.
Every import counts, module-level or inside a function."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "conformance" / "judge" / "worker"
#: What the worker's interpreter must provide besides the standard library.
WORKER_THIRD_PARTY = {"torch", "numpy", "msgpack", "safetensors", "tiktoken", "regex"}


def _imports(path: Path) -> list[tuple[int, str, int]]:
    """(line, module, relative level) of every import in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module or "", node.level))
    return out


def _folder_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "lmspec" and len(parts) > 1 and parts[1] in ("conformance", "reference", "tools"):
        return parts[1]
    return parts[0] if parts[0] in ("conformance", "reference", "tools") else None


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [("conformance", {"tools", "reference"}), ("reference", {"tools", "conformance"})],
    ids=["conformance-imports-neither-tools-nor-reference", "reference-imports-neither-tools-nor-conformance"],
)
def test_folders_import_one_way(folder: str, forbidden: set[str]) -> None:
    wrong = [
        f"{path.relative_to(REPO)}:{line}: import {module}"
        for path in sorted((REPO / folder).rglob("*.py"))
        for line, module, level in _imports(path)
        if level == 0 and _folder_of(module) in forbidden
    ]
    assert not wrong, "imports against the arrows:\n" + "\n".join(wrong)


def test_worker_imports_only_itself_and_its_runtime() -> None:
    """The worker runs alone in the sandbox: relative imports, the standard
    library and its runtime packages, nothing else of lmspec."""
    import sys

    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for path in sorted(WORKER.rglob("*.py")):
        for line, module, level in _imports(path):
            top = module.split(".")[0]
            if level == 0 and top not in stdlib and top not in WORKER_THIRD_PARTY:
                wrong.append(f"{path.relative_to(REPO)}:{line}: import {module}")
    assert not wrong, "the worker reaches outside itself:\n" + "\n".join(wrong)


def test_no_module_cycle_inside_the_judge_package() -> None:
    """Within conformance/judge/ the modules import each other one way (no
    cycle, even through imports inside functions)."""
    judge = REPO / "conformance" / "judge"
    graph: dict[str, set[str]] = {}
    for path in judge.glob("*.py"):
        name = path.stem
        deps = set()
        for _, module, level in _imports(path):
            if level == 0 and module.startswith("lmspec.conformance.judge."):
                dep = module.split(".")[3]
                if dep != "worker":
                    deps.add(dep)
        graph[name] = deps - {name}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        deps = graph.get(start, set())
        return goal in deps or any(reaches(d, goal, seen | {d}) for d in deps - seen)

    cycles = sorted(m for m in graph if reaches(m, m, set()))
    assert not cycles, f"modules of conformance/judge on an import cycle: {cycles}"
