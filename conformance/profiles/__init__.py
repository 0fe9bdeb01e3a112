"""Profiles: one curriculum's contract in one record (SPEC §6).

A profile says how the suite reaches an implementation that follows one
curriculum (its adapter functions: names, parameters, how the curriculum's
own tests call them), what it checks there (its spec items: id, title,
strength, the functions each needs, points, where SPEC.md states the rule),
what the from-scratch audit reports, which of lmspec's modules is the
reference, and which test modules belong to it. The judge, the worker, the
reports, ``lmspec spec`` and the batch read the record and nothing else, so
adding a profile is adding a record (plus its reference, oracles, tests,
mutants and variants): docs/architecture.md, "Adding a profile".

    from lmspec.conformance.profiles import get, detect, PROFILES
    profile = get("cs336")
    profile.item("2.rope").points, profile.function("run_rope").signature()
"""

import enum
import importlib
import inspect
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DEFAULT = "cs336"
#: The profiles lmspec knows (the default first): each is a module
#: ``lmspec.conformance.profiles.NAME`` of this package defining ``PROFILE``.
NAMES: tuple[str, ...] = tuple(
    sorted(
        (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")), key=lambda n: (n != DEFAULT, n)
    )
)

_P = inspect.Parameter


class Kind(enum.StrEnum):
    """What an item's result counts for."""

    CORE = "core"  # scored: the curriculum's contract
    EXTENDED = "extended"  # optional functions lmspec defines; scored apart, "not provided" when absent
    SHOULD = "should"  # efficiency rules: reported, never scored
    AUDIT = "audit"  # the from-scratch audit: reported beside the score


@dataclass(frozen=True)
class Function:
    """One adapter function of a profile.

    ``params``: parameter names; ``(name, default)`` for one with a default;
    ``"*"`` makes the following ones keyword-only; ``"**kwargs"``.
    ``positional``: how many leading arguments the curriculum's own tests
    pass positionally (the rest go by keyword), so a renamed parameter fails
    here exactly where it fails there. ``files``: path arguments the function
    reads (``"in"``) or writes (``"out"``). ``writeback``: arguments whose
    in-place changes the interface defines (they come back to the judge).
    ``replayable``: a returned object that can be made again from the same
    arguments after a worker restart. ``explicit_defaults``: the
    curriculum's tests always pass the parameters that have defaults.
    ``returns``: ``"optimizer class"`` for a function returning a
    torch.optim.Optimizer subclass (its instances step in the worker over
    mirrors of the judge's parameters)."""

    name: str
    params: tuple[Any, ...] = ()
    positional: int = 0
    files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    writeback: tuple[str, ...] = ()
    replayable: bool = False
    extended: bool = False
    explicit_defaults: bool = False
    returns: str | None = None

    def signature(self) -> inspect.Signature:
        params, kind = [], _P.POSITIONAL_OR_KEYWORD
        for entry in self.params:
            if entry == "*":
                kind = _P.KEYWORD_ONLY
            elif entry == "**kwargs":
                params.append(_P("kwargs", _P.VAR_KEYWORD))
            elif isinstance(entry, tuple):
                params.append(_P(entry[0], kind, default=entry[1]))
            else:
                params.append(_P(entry, kind))
        return inspect.Signature(params)


@dataclass(frozen=True)
class SpecItem:
    """One scored (or reported) rule of a profile. ``anchor``: the start of
    the line of SPEC.md where the rule is stated; ``note``: where its points
    come from."""

    id: str
    title: str
    functions: tuple[str, ...]
    points: float
    anchor: str
    kind: Kind = Kind.CORE
    note: str = ""

    @property
    def extended(self) -> bool:
        return self.kind is Kind.EXTENDED

    @property
    def should(self) -> bool:
        return self.kind is Kind.SHOULD


@dataclass(frozen=True)
class FromScratch:
    """What the from-scratch audit reports: qualified torch names, a trailing
    ``.*`` covering everything below a prefix. The longest pattern matching a
    name decides (``allowed`` wins a tie), so ``torch.nn.*`` can be forbidden
    while ``torch.nn.Module`` is allowed."""

    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()

    def forbids(self, name: str) -> bool:
        best, verdict = -1, False
        for patterns, result in ((self.forbidden, True), (self.allowed, False)):
            for pattern in patterns:
                if pattern.endswith(".*"):
                    stem = pattern[:-2]
                    hit = name.startswith(stem + ".")
                    length = len(stem) + 1
                else:
                    hit = name == pattern
                    length = len(pattern) + 2  # an exact name beats the prefix that covers it
                if hit and (length > best or (length == best and not result)):
                    best, verdict = length, result
        return verdict


@dataclass(frozen=True)
class Profile:
    """One curriculum's contract (the module docstring says what reads it)."""

    name: str
    title: str
    #: where the rules and the points come from (shown with the points table)
    source: str
    functions: tuple[Function, ...]
    items: tuple[SpecItem, ...]
    #: import name of lmspec's reference as a submission of this profile
    reference: str
    #: test paths, relative to conformance/
    tests: tuple[str, ...]
    #: where a repository folder keeps its adapter (or module), tried in order
    adapter_files: tuple[str, ...]
    #: names whose definition identifies a submission as this profile
    markers: tuple[str, ...]
    from_scratch: FromScratch
    #: worker-side module (conformance/judge/worker/binders/NAME.py) that builds
    #: the adapter functions from the names the curriculum itself gives
    binder: str | None = None
    #: oracle files (conformance/fixtures.py) the worker may read, for the binder
    data: tuple[str, ...] = ()
    #: the curriculum's chapters, in order, each with its core items: the
    #: verdict covers the chapters a submission has started (gpt2: the book's)
    chapters: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        names = [f.name for f in self.functions]
        ids = [i.id for i in self.items]
        for label, values in (("function", names), ("item", ids)):
            if len(set(values)) != len(values):
                raise ValueError(f"profile {self.name}: duplicate {label} names")
        for item in self.items:
            unknown = set(item.functions) - set(names)
            if unknown:
                raise ValueError(f"profile {self.name}: item {item.id} names unknown functions {sorted(unknown)}")
        in_chapters = [i for _, chapter in self.chapters for i in chapter]
        if len(set(in_chapters)) != len(in_chapters) or not set(in_chapters) <= set(ids):
            raise ValueError(f"profile {self.name}: chapters name an item twice or an unknown item")

    # --- lookups --------------------------------------------------------------------
    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"{name} is not an adapter function of profile {self.name}")

    def item(self, item_id: str) -> SpecItem:
        for i in self.items:
            if i.id == item_id:
                return i
        raise KeyError(f"{item_id} is not a spec item of profile {self.name}")

    def has_item(self, item_id: str) -> bool:
        return any(i.id == item_id for i in self.items)

    @property
    def core_functions(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions if not f.extended)

    @property
    def extended_functions(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions if f.extended)

    @property
    def audit_item(self) -> str | None:
        return next((i.id for i in self.items if i.kind is Kind.AUDIT), None)

    def points(self) -> dict[str, float]:
        """Default points per item (0 for the reported-only kinds)."""
        return {i.id: float(i.points) for i in self.items}

    def matches(self, item_id: str, selectors: Iterable[str]) -> bool:
        """True when ``item_id`` equals a selector or lies under it ("2" covers "2.rope")."""
        return any(item_id == s or item_id.startswith(s + ".") for s in selectors)

    def selected(self, spec: str | None) -> list[SpecItem]:
        """The items ``spec`` (--spec: ids or their prefixes, comma-separated) selects; all without one."""
        chosen = selectors(spec)
        return [i for i in self.items if not chosen or self.matches(i.id, chosen)]


def selectors(spec: str | None) -> list[str]:
    """The selectors of a --spec value (``"2.rope, 3"`` -> ``["2.rope", "3"]``)."""
    return [s.strip() for s in (spec or "").split(",") if s.strip()]


def get(name: str) -> Profile:
    """The profile called ``name`` (ValueError naming the known ones otherwise)."""
    if name not in NAMES:
        raise ValueError(f"unknown profile {name!r} (known: {', '.join(NAMES)})")
    return importlib.import_module(f"{__name__}.{name}").PROFILE


def all_profiles() -> tuple[Profile, ...]:
    return tuple(get(n) for n in NAMES)


def profile_of_item(item_id: str) -> Profile:
    """The profile a spec item id belongs to."""
    for profile in all_profiles():
        if profile.has_item(item_id):
            return profile
    raise KeyError(f"unknown spec item {item_id!r}")


def profile_of_function(name: str) -> Profile | None:
    for profile in all_profiles():
        if any(f.name == name for f in profile.functions):
            return profile
    return None


def detect(names: Iterable[str]) -> Profile | None:
    """The profile whose markers the given defined names hit most (None when
    none is hit). A tie goes to the profile listed first."""
    defined = set(names)
    best, best_hits = None, 0
    for profile in all_profiles():
        hits = len(defined & set(profile.markers))
        if hits > best_hits:
            best, best_hits = profile, hits
    return best
