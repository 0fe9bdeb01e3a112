"""SPEC §0, the from-scratch rule (SHOULD, audited; scored apart from the rest).

Two checks, each finding naming the torch definition and where it was used:

* runtime: every adapter function is called on tiny inputs while a profile
  hook records calls into ``torch.nn.functional``, ``torch.nn`` modules other
  than the containers, ``torch.optim`` optimizers and schedulers,
  ``clip_grad_norm_``, and whole-item shortcuts (``torch.softmax``,
  ``Tensor.softmax``, ``torch.rms_norm``, ``torch._C._nn.*``...) that are made
  on behalf of the implementation (the nearest non-torch caller is not suite
  code), however they were reached (aliases included);
* source: the implementation's imported modules are parsed (ast) for
  references to the same names through any import alias, and for assignments
  into torch / numpy / pytest / conformance (monkeypatching).

Findings go to the ``audit_findings`` user property ({function, kind, where,
adapter_function}); the grader lists them in its report.
"""

import ast
import io
import os
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch.nn.modules
import torch.nn.utils.clip_grad
import torch.optim

from conformance.adapter import CORE_FUNCTIONS, _find_root
from conformance.plugin import REPO_ROOT, get_adapter

pytestmark = pytest.mark.spec("0.from_scratch")

# --- what is forbidden ---------------------------------------------------------------------
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_NN_MODULES_DIR = os.path.dirname(torch.nn.modules.__file__) + os.sep
_OPTIM_DIR = os.path.dirname(torch.optim.__file__) + os.sep
_ALLOWED_FILES = {
    _NN_MODULES_DIR + "module.py",
    _NN_MODULES_DIR + "container.py",
    _OPTIM_DIR + "optimizer.py",
}
_ALLOWED_FILES |= {_NN_MODULES_DIR + "__init__.py", _OPTIM_DIR + "__init__.py"}
_SHORTCUTS = (
    "softmax",
    "log_softmax",
    "_softmax",
    "_log_softmax",
    "rms_norm",
    "layer_norm",
    "embedding",
)
_FORBIDDEN_BUILTINS: dict[int, str] = {
    id(getattr(torch, n)): f"torch.{n}" for n in _SHORTCUTS if callable(getattr(torch, n, None))
}
_FORBIDDEN_BUILTINS |= {id(torch.special.softmax): "torch.special.softmax"}
_FORBIDDEN_BUILTINS |= {id(torch.special.log_softmax): "torch.special.log_softmax"}
_FORBIDDEN_BUILTINS |= {
    id(v): f"torch.nn.functional.{k}"
    for k, v in vars(F).items()
    if isinstance(v, types.BuiltinFunctionType) and not k.startswith(("_", "has_torch_function"))
}
_TENSOR_METHODS = {"softmax", "log_softmax"}
_SUITE_DIRS = tuple(str(REPO_ROOT / d) + os.sep for d in ("conformance", "tools"))
_LIB_MARKERS = (
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    os.sep + "lib" + os.sep + "python",
)


def _forbidden_file(filename: str, cache: dict[str, str | None] = {}) -> str | None:  # noqa: B006
    """Label prefix when code in ``filename`` is a forbidden torch definition."""
    if filename in cache:
        return cache[filename]
    label = None
    if filename not in _ALLOWED_FILES:
        if filename == F.__file__:
            label = "torch.nn.functional"
        elif filename.startswith(_NN_MODULES_DIR):
            label = "torch.nn"
        elif filename.startswith(_OPTIM_DIR):
            label = "torch.optim"
        elif filename == torch.nn.utils.clip_grad.__file__:
            label = "torch.nn.utils"
    cache[filename] = label
    return label


def _forbidden_builtin(fn: Any) -> str | None:
    name = _FORBIDDEN_BUILTINS.get(id(fn))
    if name is not None:
        return name
    if getattr(fn, "__module__", None) == "torch._C._nn":
        return f"torch.nn.functional.{fn.__name__}"
    if getattr(fn, "__name__", None) in _TENSOR_METHODS and isinstance(getattr(fn, "__self__", None), torch.Tensor):
        return f"torch.Tensor.{fn.__name__}"
    return None


class Recorder:
    """Context manager: records forbidden torch calls made on behalf of the
    implementation while active (this thread and threads it starts)."""

    def __init__(self, root: Path, active: bool = True):
        self.root = root
        self.active = active
        self.findings: list[dict[str, str]] = []
        self._seen: set[tuple[str, str]] = set()

    def _where(self, frame: types.FrameType | None) -> tuple[str | None, str]:
        """(suite|None, location) of the first non-torch frame from ``frame``;
        None when a forbidden torch frame is on the way (a nested call)."""
        first = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(_TORCH_DIR):
                if _forbidden_file(filename):
                    return None, ""
            elif first is None:
                if filename.startswith(_SUITE_DIRS) or filename == __file__:
                    return None, ""
                first = frame
                if not any(m in filename for m in _LIB_MARKERS):
                    break
            elif not any(m in filename for m in _LIB_MARKERS):
                first = frame  # prefer the implementation's own frame over a library's
                break
            frame = frame.f_back
        if first is None:
            return None, ""
        return "ok", f"{_rel(first.f_code.co_filename, self.root)}:{first.f_lineno}"

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            prefix = _forbidden_file(frame.f_code.co_filename)
            if prefix is None:
                return
            ok, where = self._where(frame.f_back)
            head = frame.f_code.co_qualname.split(".", 1)[0]
            if head == "<module>":  # an import: the source scan reports those
                return
            name = f"{prefix}.{head}"
        elif event == "c_call":
            if frame.f_code.co_filename.startswith(_TORCH_DIR):  # torch's own plumbing
                return
            name = _forbidden_builtin(arg)
            if name is None:
                return
            ok, where = self._where(frame)
        else:
            return
        if ok and (name, where) not in self._seen:
            self._seen.add((name, where))
            self.findings.append({"function": name, "kind": "runtime call", "where": where})

    def __enter__(self) -> "Recorder":
        if not self.active:
            return self
        self._old = sys.getprofile()
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.active:
            return
        sys.setprofile(self._old if callable(self._old) else None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _rel(filename: str, root: Path) -> str:
    try:
        return str(Path(filename).resolve().relative_to(root))
    except (ValueError, OSError):
        return filename


# --- tiny inputs for each adapter function --------------------------------------------------
D, H, DFF, V, T = 8, 2, 16, 16, 4


def _w(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * 0.3


def _block_weights(prefix: str = "") -> dict[str, torch.Tensor]:
    w = {f"attn.{n}_proj.weight": _w(D, D) for n in ("q", "k", "v")}
    w |= {
        "attn.output_proj.weight": _w(D, D),
        "ln1.weight": torch.ones(D),
        "ln2.weight": torch.ones(D),
    }
    w |= {"ffn.w1.weight": _w(DFF, D), "ffn.w2.weight": _w(D, DFF), "ffn.w3.weight": _w(DFF, D)}
    return {prefix + k: v for k, v in w.items()}


def _lm_weights() -> dict[str, torch.Tensor]:
    w = _block_weights("layers.0.")
    return w | {
        "token_embeddings.weight": _w(V, D),
        "ln_final.weight": torch.ones(D),
        "lm_head.weight": _w(V, D),
    }


LM_ARGS = (V, T, D, 1, H, DFF, 10000.0)
X = _w(1, T, D)
POS = torch.arange(T)[None]
IDS = torch.tensor([[1, 2, 3, 4]])


class _PlainSGD(torch.optim.Optimizer):
    """The suite's own optimizer for the checkpoint calls (torch.optim.SGD's
    methods would count against the implementation that calls them)."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, {"lr": 0.1})

    def step(self, closure: Any = None) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data -= group["lr"] * p.grad
                    self.state[p]["steps"] = self.state[p].get("steps", 0) + 1


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))


def _adamw(fn: Callable, rec: Recorder, tmp: Path, request: pytest.FixtureRequest) -> None:
    with rec:
        cls = fn()
    if isinstance(cls, type):
        for base in cls.__mro__:
            if base.__module__.startswith("torch.optim") and base.__module__ != "torch.optim.optimizer":
                where = f"get_adamw_cls() returns {cls.__module__}.{cls.__qualname__}"
                rec.findings.append({"function": f"torch.optim.{base.__name__}", "kind": "subclass", "where": where})
                break
    p = torch.nn.Parameter(torch.ones(3))
    with rec:
        opt = cls([p], lr=1e-3, weight_decay=0.01)
    p.grad = torch.ones(3)
    with rec:
        opt.step()


def _checkpoint(save: bool) -> Callable:
    def run(fn: Callable, rec: Recorder, tmp: Path, request: pytest.FixtureRequest) -> None:
        model = _Tiny()
        opt = _PlainSGD(model.parameters())
        model.w.grad = torch.ones(3)
        opt.step()
        buf = io.BytesIO()
        if save:
            with rec:
                fn(model, opt, 3, buf)
            return
        request.getfixturevalue("run_save_checkpoint")(model, opt, 3, buf)
        buf.seek(0)
        with rec:
            fn(buf, model, opt)

    return run


def _tokenizer(fn: Callable, rec: Recorder, tmp: Path, request: pytest.FixtureRequest) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"he", 257: b"ll", 258: b"<|endoftext|>"}
    with rec:
        tok = fn(vocab, [(b"h", b"e"), (b"l", b"l")], ["<|endoftext|>"])
        ids = tok.encode("hello world<|endoftext|>")
        tok.decode(ids)
        list(tok.encode_iterable(["hello ", "world"]))


def _train_bpe(fn: Callable, rec: Recorder, tmp: Path, request: pytest.FixtureRequest) -> None:
    path = tmp / "corpus.txt"
    path.write_text("low low lower newest widest<|endoftext|>low lower\n" * 5)
    with rec:
        fn(str(path), 262, ["<|endoftext|>"])


def _call(*args: Any, **kwargs: Any) -> Callable:
    def run(fn: Callable, rec: Recorder, tmp: Path, request: pytest.FixtureRequest) -> None:
        with rec:
            fn(*args, **kwargs)

    return run


def _params_with_grad() -> list[torch.nn.Parameter]:
    ps = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2, 2))]
    for p in ps:
        p.grad = torch.full_like(p, 3.0)
    return ps


CASES: dict[str, Callable] = {
    "run_linear": _call(D, 3, _w(3, D), X),
    "run_embedding": _call(V, D, _w(V, D), IDS),
    "run_swiglu": _call(D, DFF, _w(DFF, D), _w(D, DFF), _w(DFF, D), X),
    "run_scaled_dot_product_attention": _call(X, X, X, torch.ones(T, T, dtype=torch.bool).tril()),
    "run_multihead_self_attention": _call(D, H, _w(D, D), _w(D, D), _w(D, D), _w(D, D), X),
    "run_multihead_self_attention_with_rope": _call(D, H, T, 10000.0, _w(D, D), _w(D, D), _w(D, D), _w(D, D), X, POS),
    "run_rope": _call(D // H, 10000.0, T, _w(1, T, D // H), POS),
    "run_transformer_block": _call(D, H, DFF, T, 10000.0, _block_weights(), X),
    "run_transformer_lm": _call(*LM_ARGS, _lm_weights(), IDS),
    "run_rmsnorm": _call(D, 1e-5, torch.ones(D), X),
    "run_silu": _call(X),
    "run_get_batch": _call(np.arange(50, dtype=np.int64), 2, T, "cpu"),
    "run_softmax": _call(X, -1),
    "run_cross_entropy": _call(_w(3, V), torch.tensor([1, 2, 3])),
    "run_gradient_clipping": lambda fn, rec, tmp, req: _call(_params_with_grad(), 0.01)(fn, rec, tmp, req),
    "get_adamw_cls": _adamw,
    "run_get_lr_cosine_schedule": _call(5, 1.0, 0.1, 7, 21),
    "run_save_checkpoint": _checkpoint(save=True),
    "run_load_checkpoint": _checkpoint(save=False),
    "get_tokenizer": _tokenizer,
    "run_train_bpe": _train_bpe,
    "run_silu_ffn": _call(D, 4 * D, _w(4 * D, D), _w(D, 4 * D), X),
    "run_transformer_block_ablation": _call(D, H, DFF, T, 10000.0, _block_weights(), X, norm="pre"),
    "run_transformer_lm_ablation": _call(*LM_ARGS, _lm_weights(), IDS, norm="pre"),
    "run_perplexity": _call(_w(3, V), torch.tensor([1, 2, 3])),
    "run_temperature_softmax": _call(_w(V), 0.7),
    "run_top_p_filter": _call(torch.full((V,), 1.0 / V), 0.5),
    "run_sample_next_token": lambda fn, rec, tmp, req: _call(_w(V), 0.7, 0.9, torch.Generator().manual_seed(0))(
        fn, rec, tmp, req
    ),
    "run_generate": lambda fn, rec, tmp, req: _call(
        *LM_ARGS, _lm_weights(), [1, 2], 3, 0.7, 0.9, 0, torch.Generator().manual_seed(0)
    )(fn, rec, tmp, req),
}
assert set(CORE_FUNCTIONS) <= set(CASES)


def _submission_root() -> Path:
    return _find_root(Path(get_adapter().origin).resolve())


def _describe(findings: list[dict[str, str]]) -> str:
    parts = [f"{f['function']} ({f['kind']}) at {f['where']}" for f in findings[:8]]
    more = f" and {len(findings) - 8} more" if len(findings) > 8 else ""
    return "; ".join(parts) + more


@pytest.mark.parametrize("name", list(CASES))
def test_from_scratch_runtime(name: str, request: pytest.FixtureRequest, tmp_path: Path, record_property) -> None:
    """The adapter function uses no forbidden torch.nn/functional/optim definition (SPEC §0)."""
    fn = request.getfixturevalue(name)  # skips: "not implemented: NAME" / "not provided: NAME"
    rec = Recorder(_submission_root())
    try:
        # warm-up without the (slow) profile hook: lazy imports happen here
        CASES[name](fn, Recorder(rec.root, active=False), tmp_path, request)
        CASES[name](fn, rec, tmp_path, request)
    except Exception as exc:  # the function's own bugs are other items' business
        if not rec.findings:
            pytest.skip(f"audit incomplete: {name} raised {type(exc).__name__}: {str(exc)[:200]}")
    findings = [dict(f, adapter_function=name) for f in rec.findings]
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
    "conformance",
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


def _source_files(adapter_origin: Path, root: Path) -> list[Path]:
    suite = [REPO_ROOT / d for d in ("conformance", "tools", "tests")] + [REPO_ROOT / "conftest.py"]
    files = {adapter_origin}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        p = Path(path).resolve()
        if root not in p.parents or any(m in str(p) for m in _LIB_MARKERS):
            continue
        if any(p == s or s in p.parents for s in suite) or {"tests", "test"} & set(p.relative_to(root).parts[:-1]):
            continue
        files.add(p)
    return sorted(files)[:500]


def scan_source(path: Path, root: Path) -> list[dict[str, str]]:
    """Findings of one file (empty when it does not parse)."""
    try:
        tree = ast.parse(path.read_text(errors="replace"), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    scanner = _Scanner(_rel(str(path), root))
    scanner.visit(tree)
    return scanner.findings


def test_from_scratch_sources(record_property) -> None:
    """The sources reference no forbidden torch definition and patch no library (SPEC §0)."""
    adapter = get_adapter()
    origin = Path(adapter.origin).resolve()
    root = _find_root(origin)
    findings = [f for path in _source_files(origin, root) for f in scan_source(path, root)]
    record_property("audit_findings", findings)
    assert not findings, f"from-scratch rule (SPEC §0): the sources use {_describe(findings)}"
