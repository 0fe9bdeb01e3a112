"""SPEC §0, the from-scratch rule (SHOULD, audited; reported apart from the score).

Two checks, each finding naming the torch definition and where it was used:

* runtime (in the worker, so a hint from untrusted code): every adapter
  function is called on tiny inputs (conformance/calls.py) while a profile
  hook in the worker (tools/worker/audit.py) records calls into
  ``torch.nn.functional``, ``torch.nn`` modules other than the containers,
  ``torch.optim`` optimizers and schedulers, ``clip_grad_norm_``, and
  whole-item shortcuts (``torch.softmax``, ``Tensor.softmax``,
  ``torch.rms_norm``, ``torch._C._nn.*``...) made on behalf of the
  implementation, however they were reached (aliases included); an AdamW
  class derived from a torch.optim optimizer is a finding too;
* source (here, in the judge): the files of the modules the worker imported
  from the submission are parsed (ast) for references to the same names
  through any import alias, and for assignments into torch / numpy / pytest
  (monkeypatching).

Findings go to the ``audit_findings`` user property ({function, kind, where,
adapter_function, source}); the grader lists them in its report.
"""

import ast
from pathlib import Path

import pytest

from lmspec.conformance.adapter import CORE_FUNCTIONS, REPO_ROOT
from lmspec.conformance.calls import CALLS
from lmspec.conformance.proxy import Implementation

pytestmark = pytest.mark.spec("0.from_scratch")

# --- what is forbidden (the worker's recorder uses the same list) -----------------------------
_SHORTCUTS = ("softmax", "log_softmax", "_softmax", "_log_softmax", "rms_norm", "layer_norm", "embedding")
assert set(CORE_FUNCTIONS) <= set(CALLS)


def _describe(findings: list[dict[str, str]]) -> str:
    parts = [f"{f['function']} ({f['kind']}) at {f['where']}" for f in findings[:8]]
    more = f" and {len(findings) - 8} more" if len(findings) > 8 else ""
    return "; ".join(parts) + more


def _subclass_finding(cls: object) -> list[dict[str, str]]:
    """get_adamw_cls() returning a subclass of a torch.optim optimizer."""
    for base in getattr(cls, "mro_names", []):
        module, _, name = base.rpartition(".")
        if module.startswith("torch.optim") and module != "torch.optim.optimizer":
            where = f"get_adamw_cls() returns {cls.__module__}.{cls.__qualname__}"  # type: ignore[attr-defined]
            return [{"function": f"torch.optim.{name}", "kind": "subclass", "where": where}]
    return []


@pytest.mark.parametrize("name", list(CALLS))
def test_from_scratch_runtime(
    name: str, request: pytest.FixtureRequest, impl: Implementation, tmp_path: Path, record_property
) -> None:
    """The adapter function uses no forbidden torch.nn/functional/optim
    definition at run time (SPEC §0; recorded in the sandboxed worker)."""
    fn = request.getfixturevalue(name)  # skips: "not implemented: NAME" / "not provided: NAME"
    findings: list[dict[str, str]] = []
    try:
        CALLS[name](
            fn, tmp_path, request.getfixturevalue
        )  # warm-up without the (slow) profile hook: lazy imports happen here
        audited = tmp_path / "audited"
        audited.mkdir()
        with impl.auditing(name) as recorded:
            result = CALLS[name](fn, audited, request.getfixturevalue)
        findings = list(recorded)
        if name == "get_adamw_cls":
            findings += _subclass_finding(result)
    except Exception as exc:  # the function's own bugs are other items' business
        if not findings:
            pytest.skip(f"audit incomplete: {name} raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    findings = [
        dict(
            f,
            where=impl.display(f["where"]),
            adapter_function=name,
            source="worker (a hint from the submission's process)",
        )
        for f in findings
    ]
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch rule (SPEC §0): {name} uses {_describe(findings)}"


# --- static scan of the implementation's sources ------------------------------------------
_ALLOWED_NN = {
    "Module",
    "ModuleList",
    "ModuleDict",
    "Sequential",
    "ParameterList",
    "ParameterDict",
    "Parameter",
}
_ALLOWED_NN |= {
    "Buffer",
    "UninitializedParameter",
    "UninitializedBuffer",
    "init",
    "functional",
    "utils",
    "modules",
}
_ALLOWED_NN |= {"parameter"}
_CLIP = {
    "clip_grad_norm_",
    "clip_grad_norm",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
}
_PATCH_ROOTS = (
    "torch",
    "numpy",
    "pytest",
    "_pytest",
    "hypothesis",
    "builtins",
    "math",
)


def forbidden_name(dotted: str) -> bool:
    """True for a torch name the from-scratch rule excludes."""
    parts = dotted.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if parts[1] in _SHORTCUTS or dotted in ("torch.special.softmax", "torch.special.log_softmax"):
        return True
    if parts[1:3] == ["_C", "_nn"] and len(parts) > 3:
        return True
    if parts[1] == "optim":
        return len(parts) > 2 and parts[2] not in ("Optimizer", "optimizer")
    if parts[1] != "nn" or len(parts) < 3:
        return False
    if parts[2] == "functional":
        return len(parts) > 3
    if parts[2] == "utils":
        return len(parts) > 3 and (parts[3] in _CLIP or parts[-1] in _CLIP)
    return parts[2] not in _ALLOWED_NN


def _patches_library(dotted: str) -> bool:
    """Assigning to this name changes a library the suite relies on (settings
    such as torch.backends.* flags are fine)."""
    parts = dotted.split(".")
    return parts[0] in _PATCH_ROOTS and "backends" not in parts and "config" not in parts


class _Scanner(ast.NodeVisitor):
    def __init__(self, where: str):
        self.where = where
        self.aliases: dict[str, str] = {}
        self.findings: list[dict[str, str]] = []

    def _add(self, name: str, kind: str, node: ast.AST) -> None:
        self.findings.append({"function": name, "kind": kind, "where": f"{self.where}:{getattr(node, 'lineno', 0)}"})

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            if forbidden_name(a.name):
                self._add(a.name, "import", node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for a in node.names:
            full = f"{node.module}.{a.name}"
            self.aliases[a.asname or a.name] = full
            if (
                a.name == "*" and (forbidden_name(node.module + ".x") or node.module == "torch.nn.functional")
            ) or forbidden_name(full):
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
        elif forbidden_name(dotted):
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
        root = REPO_ROOT / "reference" if origin.is_relative_to(REPO_ROOT / "reference") else origin.parent
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


def scan_source(path: Path, root: Path) -> list[dict[str, str]]:
    """Findings of one file (empty when it does not parse)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    try:
        where = str(path.relative_to(root))
    except ValueError:
        where = str(path)
    scanner = _Scanner(where)
    scanner.visit(tree)
    return scanner.findings


def test_from_scratch_sources(impl: Implementation, record_property) -> None:
    """The sources reference no forbidden torch definition and patch no library (SPEC §0)."""
    files, root = _source_files(impl)
    findings = [dict(f, source="judge (static scan)") for path in files for f in scan_source(path, root)]
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch rule (SPEC §0): the sources use {_describe(findings)}"
