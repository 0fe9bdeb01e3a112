"""MUTANT: the GPT-2 pre-tokenization pattern compiled case-insensitively
(``regex.compile(PAT, regex.IGNORECASE)``), in training and in encoding: the
upper-case ``'S`` of ``O'Sullivan`` (and ``'T``, ``'LL``, ``'VE``, ``'M``,
``'D``, ``'RE``) becomes a contraction pre-token. tiktoken's pattern (and
the handout's) is case-sensitive: ``O | ' | Sullivan``. Seen in a real
repository (issue 19); the 1.1 tests must catch it and name the flag.
"""

import regex

from lmspec.reference.adapter import *  # noqa: F403
from lmspec.reference.tokenizer import pretokenize
from lmspec.reference.tokenizer import tokenizer as _tokenizer_module

MUTANT = {
    "spec": "1.1.pretokenize",
    "bug": "GPT-2 pattern compiled with regex.IGNORECASE: upper-case 'S, 'T, 'LL, 'VE become contractions",
    "run": ["1.1.pretokenize"],
    "hinted": ["re.IGNORECASE"],
}

_CASELESS = regex.compile(pretokenize.GPT2_PATTERN, regex.IGNORECASE)  # BUG
pretokenize.GPT2_REGEX = _CASELESS
_tokenizer_module.GPT2_REGEX = _CASELESS
