"""What ``--spec`` selects: spec item ids and their prefixes, and the names a
reader knows an item by.

    --spec 2.rope                 the item (a prefix, ``2``, selects all of §2)
    --spec run_rope               the items that call that adapter function
    --spec MultiHeadAttention     the gpt2 items that need the book's class
    --spec MultiHeadedAttention   the encdec item that the annotated notes' class implements

A name is turned into the ids of the items it selects before the judge
starts, so the suite, the reports and ``--watch`` only ever see ids.
"""

from collections.abc import Iterable

from lmspec.conformance.profiles import Profile, selectors

#: The annotated notes' names (SPEC §6.2) -> the encdec adapter functions they implement.
ANNOTATED_NAMES: dict[str, tuple[str, ...]] = {
    "attention": ("run_attention",),
    "MultiHeadedAttention": ("run_multihead_attention",),
    "PositionwiseFeedForward": ("run_feed_forward",),
    "LayerNorm": ("run_layer_norm",),
    "PositionalEncoding": ("run_sinusoidal_positions",),
    "subsequent_mask": ("run_target_mask",),
    "EncoderLayer": ("run_encoder_layer",),
    "DecoderLayer": ("run_decoder_layer",),
    "EncoderDecoder": ("run_encoder_decoder",),
    "make_model": ("run_encoder_decoder",),
    "greedy_decode": ("run_greedy_decode",),
    "rate": ("run_rate",),
    "LabelSmoothing": ("run_label_smoothing_loss",),
}


def _text_names(profile: Profile) -> dict[str, set[str]]:
    """A name of the profile's text -> the adapter functions that need it."""
    if profile.name == "gpt2":
        # the binder's table of the book's names; importing it imports torch, so only when a name is asked for
        from lmspec.conformance.judge.worker.binders.gpt2 import NEEDS

        names: dict[str, set[str]] = {}
        for function, needs in NEEDS.items():
            for name in needs:
                names.setdefault(name, set()).add(function)
        return names
    if profile.name == "encdec":
        return {name: set(functions) for name, functions in ANNOTATED_NAMES.items()}
    return {}


def is_id_or_prefix(selector: str, profiles: Iterable[Profile]) -> bool:
    return any(i.id == selector or i.id.startswith(selector + ".") for p in profiles for i in p.items)


def item_ids(selector: str, profiles: Iterable[Profile]) -> list[str]:
    """The ids of the items ``selector`` names (a function's or a text's
    name); [] when it names none. Ids and prefixes are the caller's."""
    ids: list[str] = []
    for profile in profiles:
        functions = {selector} | _text_names(profile).get(selector, set())
        ids += [i.id for i in profile.items if functions & set(i.functions) and i.id not in ids]
    return ids


def expand(spec: str, profiles: list[Profile]) -> tuple[str, list[str]]:
    """``spec`` with every name replaced by the ids it selects, and the
    selectors that select nothing."""
    kept: list[str] = []
    unknown: list[str] = []
    for selector in selectors(spec):
        ids = [selector] if is_id_or_prefix(selector, profiles) else item_ids(selector, profiles)
        if not ids:
            unknown.append(selector)
        kept += [i for i in ids if i not in kept]
    return ",".join(kept), unknown
