"""Points per spec item: the defaults are each profile's record
(conformance/profiles/NAME.py says where they come from, item by item);
a course overrides them with ``--points FILE``.

``--points FILE``: a JSON object ``{"points": {"2.rope": 4, ...},
"partial_credit": false}`` (or just the ``{id: points}`` mapping). Ids left
out keep the defaults. With ``partial_credit`` an item that is not fully
passed earns ``points × passed tests / counted tests`` instead of 0.

The same file sets what Gradescope shows (docs/course.md):

    "visibility": {"default": "after_due_date", "0": "visible", "2.rope": "hidden"}
    "leaderboard": true            # or a list of "score", "percent", "extended_score", "time"

A visibility key is ``default``, a spec id, or a section prefix ("1.3" covers
every 1.3.* item; the longest matching key wins); values are Gradescope's
``visible``, ``hidden``, ``after_due_date``, ``after_published``.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from lmspec.conformance import profiles

#: Gradescope's test visibility values (gradescope-autograders.readthedocs.io/en/latest/specs/).
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
#: leaderboard columns a --points file can ask for: name -> (Gradescope column name, sort order)
LEADERBOARD_COLUMNS = {
    "score": ("Score", "desc"),
    "percent": ("Percent", "desc"),
    "extended_score": ("Extended score", "desc"),
    "time": ("Grading time (s)", "asc"),
}


def _all_points() -> dict[str, float]:
    return {k: v for p in profiles.all_profiles() for k, v in p.points().items()}


@dataclass(frozen=True)
class PointsTable:
    #: points per item id (every profile's defaults: item ids are unique across profiles)
    points: dict[str, float] = field(default_factory=_all_points)
    partial_credit: bool = False
    source: str = "each profile's record (conformance/profiles/)"
    #: Gradescope visibility per spec id or section prefix, and "default"
    visibility: dict[str, str] = field(default_factory=dict)
    #: Gradescope leaderboard columns (keys of LEADERBOARD_COLUMNS); empty: no leaderboard
    leaderboard: tuple[str, ...] = ()

    @classmethod
    def default(cls, profile: str | None = None) -> "PointsTable":
        """The defaults, with the named profile's source (all profiles' points)."""
        return cls(source=profiles.get(profile or profiles.DEFAULT).source)

    def __getitem__(self, item_id: str) -> float:
        return float(self.points.get(item_id, 0))

    def visibility_of(self, item_id: str) -> str:
        """The Gradescope visibility of an item: its own key, else the
        longest section prefix, else "default", else visible."""
        keys = [k for k in self.visibility if k == item_id or item_id.startswith(k + ".")]
        if keys:
            return self.visibility[max(keys, key=len)]
        return self.visibility.get("default", "visible")

    @property
    def default_visibility(self) -> str:
        return self.visibility.get("default", "visible")


class PointsFileError(ValueError):
    """The --points file is not valid."""


_KEYS = ("points", "partial_credit", "visibility", "leaderboard")


def load_points(path: str | Path | None, profile: str | None = None) -> PointsTable:
    """The default table, or the defaults updated from a JSON file."""
    if path is None:
        return PointsTable.default(profile)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PointsFileError(f"--points {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise PointsFileError(f"--points {path}: expected a JSON object")
    structured = any(k in data for k in _KEYS)
    if structured:
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise PointsFileError(f"--points {path}: unknown key(s) {', '.join(map(repr, unknown))} (known: {_KEYS})")
    mapping = data.get("points", {}) if structured else data
    partial = data.get("partial_credit", False) if structured else False
    if not isinstance(partial, bool):
        raise PointsFileError(f"--points {path}: 'partial_credit' must be true or false, got {partial!r}")
    if not isinstance(mapping, dict):
        raise PointsFileError(f"--points {path}: 'points' must be an object of spec id -> number")
    points = _all_points()
    for key, value in mapping.items():
        if key not in points:
            raise PointsFileError(f"--points {path}: unknown spec id {key!r}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise PointsFileError(f"--points {path}: points for {key!r} must be a number >= 0, got {value!r}")
        points[key] = float(value)
    return PointsTable(
        points=points,
        partial_credit=partial,
        source=str(path),
        visibility=_visibility(path, data.get("visibility", {}) if structured else {}),
        leaderboard=_leaderboard(path, data.get("leaderboard", False) if structured else False),
    )


def _visibility(path: str | Path, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PointsFileError(f"--points {path}: 'visibility' must be an object of spec id (or prefix) -> visibility")
    out = {}
    for key, vis in value.items():
        if key != "default" and not any(i == key or i.startswith(key + ".") for i in _all_points()):
            raise PointsFileError(
                f"--points {path}: visibility: {key!r} is not 'default', a spec id or a prefix of one"
            )
        if vis not in VISIBILITIES:
            raise PointsFileError(
                f"--points {path}: visibility of {key!r} must be one of {', '.join(VISIBILITIES)}, got {vis!r}"
            )
        out[key] = vis
    return out


def _leaderboard(path: str | Path, value: object) -> tuple[str, ...]:
    if value is False or value is None:
        return ()
    if value is True:
        return ("score",)
    if isinstance(value, list) and value and all(v in LEADERBOARD_COLUMNS for v in value):
        return tuple(dict.fromkeys(value))
    raise PointsFileError(
        f"--points {path}: 'leaderboard' must be true, false or a list of {', '.join(LEADERBOARD_COLUMNS)}; "
        f"got {value!r}"
    )
