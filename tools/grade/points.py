"""Points per spec item.

Source: the CS336 (Stanford, spring 2025) assignment 1 handout, "Assignment 1
(basics): Building a Transformer LM", which gives points per problem. The code
problems it grades through ``tests/adapters.py`` are:

    train_bpe 15, tokenizer 15, linear 1, embedding 1, rmsnorm 1,
    positionwise_feedforward 2, rope 2, softmax 1,
    scaled_dot_product_attention 5, multihead_self_attention 5,
    transformer_block 3, transformer_lm 3, cross_entropy 1, adamw 2,
    learning_rate_schedule 1, gradient_clipping 1, data_loading 2,
    checkpointing 1                                          (total 62)

Where one handout problem covers several spec items the points are split
(our choice, marked "split" below): train_bpe 15 = pre-tokenization 3 +
training 12; tokenizer 15 = encode 6 + decode 3 + encode_iterable 3 +
special tokens 3; positionwise_feedforward 2 = SiLU 0.5 + SwiGLU 1.5.

Extended items are optional and scored separately (never part of the
required score): decoding 3 (handout "decoding"), ablations 4 (handout
layer_norm_ablation + pre_norm_ablation + no_pos_emb + swiglu_ablation, one
each), accounting 2 (the checkable part of the written
transformer_accounting problem), perplexity 1 (lmspec's own). The
from-scratch audit (SPEC §0, a SHOULD) carries no points: it is reported
beside the score.

Override with ``--points FILE``: a JSON object ``{"points": {"2.rope": 4,
...}, "partial_credit": false}`` (or just the ``{id: points}`` mapping). Ids
left out keep the defaults below. With ``partial_credit`` an item that is not
fully passed earns ``points × passed tests / counted tests`` instead of 0.

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

from lmspec.conformance.spec_items import BY_ID

DEFAULT_POINTS: dict[str, float] = {
    "0.from_scratch": 0,  # audited, reported separately
    "1.2.train_bpe.speed": 0,  # SHOULD: reported, not scored
    "1.3.encode_iterable.memory": 0,  # SHOULD: reported, not scored
    "1.1.pretokenize": 3,  # split of train_bpe (15)
    "1.2.train_bpe": 12,  # split of train_bpe (15)
    "1.3.encode": 6,  # split of tokenizer (15)
    "1.3.decode": 3,  # split of tokenizer (15)
    "1.3.encode_iterable": 3,  # split of tokenizer (15)
    "1.3.special_tokens": 3,  # split of tokenizer (15)
    "2.linear": 1,
    "2.embedding": 1,
    "2.rmsnorm": 1,
    "2.silu": 0.5,  # split of positionwise_feedforward (2)
    "2.swiglu": 1.5,  # split of positionwise_feedforward (2)
    "2.rope": 2,
    "2.softmax": 1,
    "2.sdpa": 5,
    "2.mha": 5,
    "2.block": 3,
    "2.lm": 3,
    "2.ablations": 4,  # extended
    "2.accounting": 2,  # extended
    "3.cross_entropy": 1,
    "3.perplexity": 1,  # extended
    "3.adamw": 2,
    "3.cosine_schedule": 1,
    "3.gradient_clipping": 1,
    "3.get_batch": 2,
    "3.checkpoint": 1,
    "4.generation": 3,  # extended
}


#: Gradescope's test visibility values (gradescope-autograders.readthedocs.io/en/latest/specs/).
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
#: leaderboard columns a --points file can ask for: name -> (Gradescope column name, sort order)
LEADERBOARD_COLUMNS = {
    "score": ("Score", "desc"),
    "percent": ("Percent", "desc"),
    "extended_score": ("Extended score", "desc"),
    "time": ("Grading time (s)", "asc"),
}


@dataclass(frozen=True)
class PointsTable:
    points: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_POINTS))
    partial_credit: bool = False
    source: str = "CS336 2025 assignment 1 handout (tools/grade/points.py)"
    #: Gradescope visibility per spec id or section prefix, and "default"
    visibility: dict[str, str] = field(default_factory=dict)
    #: Gradescope leaderboard columns (keys of LEADERBOARD_COLUMNS); empty: no leaderboard
    leaderboard: tuple[str, ...] = ()

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


def load_points(path: str | Path | None) -> PointsTable:
    """The default table, or the defaults updated from a JSON file."""
    if path is None:
        return PointsTable()
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
    points = dict(DEFAULT_POINTS)
    for key, value in mapping.items():
        if key not in BY_ID:
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
        if key != "default" and not any(i == key or i.startswith(key + ".") for i in BY_ID):
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
