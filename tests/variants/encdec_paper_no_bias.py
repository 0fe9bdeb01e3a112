"""VARIANT: the paper's model as a faithful codebase writes it: attention
projections W^Q, W^K, W^V, W^O without biases (declared
``attention_bias=False``: the suite gives it no bias), fairseq's label
smoothing (ε / (V − 1) on every class but the true one, declared
``label_smoothing="others"``), and ``nn.LayerNorm(d, eps=1e-6)``'s epsilon
(1e-6 inside the root), which only the STRICT near-constant-row test can
tell from torch's 1e-5: its finding names it."""

from lmspec.reference.encdec import layers as _layers
from lmspec.reference.encdec.adapter import bind as _bind
from lmspec.reference.encdec.conventions import PAPER

_init = _layers.LayerNorm.__init__


def _eps_1e6(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.eps = 1e-6


_layers.LayerNorm.__init__ = _eps_1e6
globals().update(_bind(PAPER.with_(attention_bias=False, label_smoothing="others")))

VARIANT = {
    "what": "the paper's bias-free attention projections, fairseq's smoothing, LayerNorm eps 1e-6",
    "profile": "encdec",
    "findings": ["eps 1e-6, inside the root"],
}
