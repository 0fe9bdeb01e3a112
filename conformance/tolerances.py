"""Named, derived tolerances: one per op and dtype.

Each bound is a few times the float32-vs-float64 error measured on *correct*
variants (einsum vs matmul, fused vs separate projections, other op orders);
the comment next to each records the measurement (tools: see README
"Tolerances"). Failures print the tolerance they were held to.
"""

from typing import NamedTuple


class Tolerance(NamedTuple):
    atol: float
    rtol: float
    why: str = ""

    def __str__(self) -> str:
        return f"atol={self.atol:g}, rtol={self.rtol:g}"


# Exact: integer outputs, lookups, things with no rounding at all.
EXACT = Tolerance(0.0, 0.0, "no arithmetic: must be bit-exact")
