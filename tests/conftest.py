"""Meta-tests: the suite rejects broken implementations and accepts correct
variants; the tools work end to end.

The reference's tokenizer is not instrumented by its lazy type-check hook in
normal use (reference/__init__.py says why); here, in lmspec's own tests, it
is, before anything imports it.
"""

import sys

from lmspec.reference import TYPECHECKED

if TYPECHECKED and "lmspec.reference.tokenizer" not in sys.modules:
    from jaxtyping import install_import_hook

    install_import_hook("lmspec.reference.tokenizer", "beartype.beartype")
