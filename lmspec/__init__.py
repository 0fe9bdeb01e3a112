"""lmspec: a conformance suite and grader, with a typed reference
implementation, for building a language model from scratch.

Installed, the product's folders are subpackages: ``lmspec.reference``,
``lmspec.conformance``, ``lmspec.tools``, with ``lmspec.snapshots`` and
``lmspec.docs`` as data. In a source checkout those folders live beside this
package, at the top of the repository; the path below makes the same names
resolve there, so the code never depends on how it was installed.
"""

import os
import sys

if sys.argv[:1] == ["-m"] and not sys.flags.safe_path and sys.path and sys.path[0] == os.getcwd():
    # ``python -m lmspec ...`` put the working folder first on sys.path: run from inside a
    # submission (``cd repo && python -m lmspec grade .``), its torch.py or numpy.py would be
    # imported by the grader (issue 32). lmspec itself is found already; its folders resolve
    # through __path__ below. (``os`` and ``sys`` are loaded before any folder is searched.)
    del sys.path[0]

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "conformance" / "plugin.py").is_file():
    __path__.append(str(_CHECKOUT))
    #: The folder that holds conformance/, reference/, tools/, snapshots/ and docs/.
    ROOT = _CHECKOUT
else:
    ROOT = Path(__file__).resolve().parent

__version__ = "0.2.0"
