"""The from-scratch audit (SPEC §0 and each profile's list), judge side.

Two kinds of findings, each naming the torch definition and where it was
used, filtered by the profile's ``FromScratch`` record (what it forbids and
allows; conformance/profiles/):

* runtime: the worker records (conformance/judge/worker/audit.py) every call
  into ``torch.nn.functional``, ``torch.nn`` modules other than the
  containers, ``torch.optim`` optimizers and schedulers, ``clip_grad_norm_``
  and whole-item shortcuts (``torch.softmax``, ``Tensor.softmax``,
  ``torch.rms_norm``, ``torch._C._nn.*``...) made on behalf of the
  implementation, however they were reached; these come from the untrusted
  process and are labelled as hints; ``runtime_findings`` keeps the ones the
  profile forbids;
* source: the files of the modules the worker imported from the submission
  are parsed here (ast) for references to forbidden names through any
  import alias, and for assignments into torch / numpy / pytest
  (monkeypatching): ``source_findings``.

A profile's audit test module calls each adapter function on tiny inputs
(its ``calls`` recipes) with ``runtime_check`` and the sources with
``source_check``; findings go to the ``audit_findings`` user property
({function, kind, where, adapter_function, source}).
"""

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmspec import ROOT
from lmspec.conformance.judge.implementation import Implementation
from lmspec.conformance.judge.remote import RemoteOptimizerClass
from lmspec.conformance.plain import raised
from lmspec.conformance.profiles import FromScratch

_PATCH_ROOTS = (
    "torch",
    "numpy",
    "pytest",
    "_pytest",
    "hypothesis",
    "builtins",
    "math",
)


def describe(findings: list[dict[str, str]]) -> str:
    parts = [f"{f['function']} ({f['kind']}) at {f['where']}" for f in findings[:8]]
    more = f" and {len(findings) - 8} more" if len(findings) > 8 else ""
    return "; ".join(parts) + more


def subclass_finding(cls: object) -> list[dict[str, str]]:
    """get_adamw_cls() returning a subclass of a torch.optim optimizer."""
    if not isinstance(cls, RemoteOptimizerClass):
        return []
    for base in cls.mro_names:
        module, _, name = base.rpartition(".")
        if module.startswith("torch.optim") and module != "torch.optim.optimizer":
            where = f"get_adamw_cls() returns {cls.__module__}.{cls.__qualname__}"  # type: ignore[attr-defined]
            return [{"function": f"torch.optim.{name}", "kind": "subclass", "where": where}]
    return []


def _patches_library(dotted: str) -> bool:
    """Assigning to this name changes a library the suite relies on (settings
    such as torch.backends.* flags are fine)."""
    parts = dotted.split(".")
    return parts[0] in _PATCH_ROOTS and "backends" not in parts and "config" not in parts


class _Scanner(ast.NodeVisitor):
    def __init__(self, where: str, policy: FromScratch):
        self.where = where
        self.policy = policy
        self.aliases: dict[str, str] = {}
        self.findings: list[dict[str, str]] = []

    def _add(self, name: str, kind: str, node: ast.AST) -> None:
        self.findings.append({"function": name, "kind": kind, "where": f"{self.where}:{getattr(node, 'lineno', 0)}"})

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            if self.policy.forbids(a.name):
                self._add(a.name, "import", node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for a in node.names:
            full = f"{node.module}.{a.name}"
            self.aliases[a.asname or a.name] = full
            if (a.name == "*" and self.policy.forbids(node.module + ".x")) or self.policy.forbids(full):
                self._add(full, "import", node)

    def _dotted(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is None:
            self.generic_visit(node)
            return
        if isinstance(node.ctx, ast.Store | ast.Del) and _patches_library(dotted):
            self._add(dotted, "monkeypatch", node)
        elif self.policy.forbids(dotted):
            self._add(dotted, "reference", node)
        # the whole chain is judged once, at its outermost attribute

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            target = self._dotted(node.args[0])
            if target and _patches_library(target + ".x"):
                self._add(f"setattr({target}, ...)", "monkeypatch", node)
        self.generic_visit(node)


def _source_files(impl: Implementation) -> tuple[list[Path], Path]:
    """The submission's own source files the worker imported (the adapter
    file included; its tests and conftest never are), and their root."""
    if impl.spec.root is not None:
        root = impl.spec.root
    else:  # an importable module: the reference, or an installed package
        origin = Path(impl.host_path(str(impl.ready.get("origin") or "")))
        root = ROOT / "reference" if origin.is_relative_to(ROOT / "reference") else origin.parent
    files = set()
    if str(impl.ready.get("origin", "")).endswith(".py"):
        files.add(Path(impl.host_path(str(impl.ready["origin"]))))
    modules, _ = impl.modules()
    for _, path in modules:
        p = Path(impl.host_path(path))
        if not path.endswith(".py") or not p.is_relative_to(root):
            continue
        rel = p.relative_to(root).parts
        if p.name == "conftest.py" or p.name.startswith("test_") or {"site-packages", ".venv"} & set(rel):
            continue
        files.add(p)
    return sorted(files)[:500], root


def scan_source(path: Path, root: Path, policy: FromScratch) -> list[dict[str, str]]:
    """Findings of one file (empty when it does not parse)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    try:
        where = str(path.relative_to(root))
    except ValueError:
        where = str(path)
    scanner = _Scanner(where, policy)
    scanner.visit(tree)
    return scanner.findings


def source_findings(impl: Implementation, policy: FromScratch) -> list[dict[str, str]]:
    """What the static scan finds in the submission's own imported sources."""
    files, root = _source_files(impl)
    return [dict(f, source="judge (static scan)") for path in files for f in scan_source(path, root, policy)]


def runtime_findings(
    impl: Implementation,
    name: str,
    recipe: Callable[..., Any],
    fn: Callable[..., Any],
    tmp_path: Path,
    other: Callable[[str], Any],
    policy: FromScratch,
) -> list[dict[str, str]]:
    """Call ``fn`` (the adapter function ``name``) through ``recipe`` twice:
    once to warm up (lazy imports happen there), once with the worker's
    recorder on; the findings the profile forbids, with their places shown
    as the submission's author knows them. A function that raises skips
    the check (its bugs are other items' business)."""
    findings: list[dict[str, str]] = []
    try:
        recipe(fn, tmp_path, other)
        audited = tmp_path / "audited"
        audited.mkdir()
        with impl.auditing(name) as recorded:
            result = recipe(fn, audited, other)
        findings = [f for f in recorded if policy.forbids(f["function"])]
        findings += [f for f in subclass_finding(result) if policy.forbids(f["function"])]
    except Exception as exc:
        if not findings:
            pytest.skip(f"audit incomplete: {name} raised {raised(exc)}")
    return [
        dict(
            f,
            where=impl.display(f["where"]),
            adapter_function=name,
            source="worker (a hint from the submission's process)",
        )
        for f in findings
    ]
