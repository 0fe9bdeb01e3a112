"""The reference implementation exposed through the adapter interface (SPEC §5).

Core profile: the 21 functions of the CS336 2025 ``tests/adapters.py``, same
names and signatures. Extended profile: optional functions lmspec defines for
what the core profile cannot reach (generation, accounting, ablations),
listed with their signatures in docs/CONTRIBUTING-suite.md and docs/students.md.

Each area lives in its own module; this package re-exports all of them so
``--adapter reference.adapter`` sees one flat module like a student's file.
"""

from lmspec.reference.adapter import nn as _nn
from lmspec.reference.adapter import tokenizer as _tokenizer
from lmspec.reference.adapter import training as _training
from lmspec.reference.adapter.nn import *  # noqa: F403
from lmspec.reference.adapter.tokenizer import *  # noqa: F403
from lmspec.reference.adapter.training import *  # noqa: F403

# Only the adapter functions: `from reference.adapter import *` in a mutant or
# variant must not shadow names such as `nn` (torch.nn) with our submodules.
__all__ = [*_nn.__all__, *_tokenizer.__all__, *_training.__all__]
