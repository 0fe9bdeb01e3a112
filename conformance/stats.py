"""Statistical checks with a computed false-failure probability.

Used where the SPEC asks for randomness with a given distribution
(§3 get_batch: uniform start indices; §4: sampling from the filtered
distribution). A correct implementation must pass for *any* seed with
probability at least ``1 − FALSE_FAILURE`` (1e-6); the tests still seed torch,
numpy and ``random`` so CI is deterministic.

Derivation
----------
Draw ``n`` samples ``X_1..X_n`` from categories ``0..S−1`` with claimed
probabilities ``p_i``. For a set ``A`` of categories let ``N_A = Σ_j 1[X_j ∈ A]``
and ``p_A = Σ_{i∈A} p_i``. Under a correct implementation the indicators are
independent Bernoulli(p_A), so the Chernoff–Hoeffding bound in relative-entropy
form holds (Hoeffding 1963, Thm. 1)::

    P(N_A ≥ a) ≤ exp(−n·KL(a/n ‖ p_A))   for a ≥ n p_A
    P(N_A ≤ b) ≤ exp(−n·KL(b/n ‖ p_A))   for b ≤ n p_A
    KL(q ‖ p) = q ln(q/p) + (1−q) ln((1−q)/(1−p)).

The bounds also hold when a batch draws its starts *without* replacement
(still uniform, which the SPEC allows): Hoeffding 1963, Thm. 4, shows the
moment-generating function of a sum drawn without replacement is at most the
one with replacement, and the Chernoff bound only uses that function.

The test checks ``E`` one-sided events: each category's count too high / too
low (``A = {i}``) and each prefix of the CDF too high / too low
(``A = {0..k}``, k < S−1; catches smooth drifts that no single cell shows).
Each event's threshold is the first integer whose Chernoff bound is
``≤ δ = BUDGET / E``; by the union bound the probability that a correct
implementation fails any event is ``≤ BUDGET``. Categories with ``p_i = 0``
must never appear (probability exactly 0 for a correct implementation), and
``p_A = 1`` must hold for every draw; neither uses any of the budget.

``BUDGET = FALSE_FAILURE / 2``: the other half absorbs the implementation
computing its probabilities in float32 (relative error ≲ 1e-6 shifts each
exponent by ≲ n·|q−p|·Δp/(p(1−p)) ≈ 1e-3, a factor ≈ 1.001) and sampler
granularity (2^-24).

``miss_probability`` bounds the chance that a category with probability
``≥ p`` is never drawn in ``n`` draws: ``S·(1−p)^n`` (union bound; sampling
without replacement only lowers it).
"""

import math
from collections.abc import Sequence
from typing import NamedTuple

FALSE_FAILURE = 1e-6
BUDGET = FALSE_FAILURE / 2


def kl_bernoulli(q: float, p: float) -> float:
    """KL(Bernoulli(q) ‖ Bernoulli(p)) in nats, for 0 < p < 1, 0 ≤ q ≤ 1."""
    out = 0.0
    if q > 0:
        out += q * math.log(q / p)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - p))
    return out


class CountRange(NamedTuple):
    lo: int  # smallest accepted count
    hi: int  # largest accepted count


def accepted_count_range(n: int, p: float, delta: float) -> CountRange:
    """Counts of a Bernoulli(p) event in ``n`` draws that a one-sided Chernoff
    test at level ``delta`` (each side) accepts. The bound decreases
    monotonically away from ``n·p``, so each threshold is found by bisection."""
    if p <= 0:
        return CountRange(0, 0)
    if p >= 1:
        return CountRange(n, n)
    mean = n * p

    def rejected(a: int) -> bool:
        return a != mean and math.exp(-n * kl_bernoulli(a / n, p)) <= delta

    # smallest a > mean that is rejected (n + 1 when none is)
    lo_a, hi_a = math.floor(mean) + 1, n + 1
    while lo_a < hi_a:
        mid = (lo_a + hi_a) // 2
        if rejected(mid):
            hi_a = mid
        else:
            lo_a = mid + 1
    # largest b < mean that is rejected (-1 when none is)
    lo_b, hi_b = -1, math.ceil(mean) - 1
    while lo_b < hi_b:
        mid = (lo_b + hi_b + 1) // 2
        if rejected(mid):
            lo_b = mid
        else:
            hi_b = mid - 1
    return CountRange(lo_b + 1, min(lo_a - 1, n))


def miss_probability(n_categories: int, p_min: float, n: int) -> float:
    """Upper bound on P(some category of probability ≥ p_min is never drawn)."""
    return n_categories * (1 - p_min) ** n


def check_distribution(
    counts: Sequence[int],
    probs: Sequence[float],
    *,
    budget: float = BUDGET,
    labels: str = "category",
) -> str | None:
    """None when ``counts`` are consistent with ``probs`` (see module docstring),
    else a sentence naming the worst violation and the accepted range."""
    n = sum(counts)
    s = len(probs)
    if len(counts) != s:
        raise ValueError(f"{len(counts)} counts for {s} probabilities")
    for i, (c, p) in enumerate(zip(counts, probs)):
        if p == 0 and c:
            return f"{labels} {i} has probability 0 but was drawn {c} times in {n} draws"
    cdf = [sum(probs[: k + 1]) for k in range(s - 1)]
    events = [(f"{labels} {i}", [i], p) for i, p in enumerate(probs) if 0 < p < 1]
    events += [(f"{labels}s 0..{k}", list(range(k + 1)), q) for k, q in enumerate(cdf) if 1e-12 < q < 1 - 1e-12]
    if not events:
        return None
    delta = budget / (2 * len(events))
    worst: tuple[float, str] | None = None
    for name, members, p in events:
        got = sum(counts[i] for i in members)
        rng = accepted_count_range(n, p, delta)
        if not rng.lo <= got <= rng.hi:
            z = abs(got - n * p) / math.sqrt(n * p * (1 - p))
            text = (
                f"{name} drawn {got} times in {n} draws; probability {p:.6g} gives "
                f"{n * p:.1f} expected "
                f"and a correct sampler lands in [{rng.lo}, {rng.hi}] "
                f"(whole test: false-failure probability ≤ {FALSE_FAILURE:g})"
            )
            if worst is None or z > worst[0]:
                worst = (z, text)
    return worst[1] if worst else None
