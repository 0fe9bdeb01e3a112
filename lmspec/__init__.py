"""lmspec: a conformance suite and grader, with a typed reference
implementation, for building a language model from scratch.

Installed, the product's folders are subpackages: ``lmspec.reference``,
``lmspec.conformance``, ``lmspec.tools``, with ``lmspec.snapshots`` and
``lmspec.docs`` as data. In a source checkout those folders live beside this
package, at the top of the repository; the path below makes the same names
resolve there, so the code never depends on how it was installed.
"""

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "conformance" / "plugin.py").is_file():
    __path__.append(str(_CHECKOUT))
    #: The folder that holds conformance/, reference/, tools/, snapshots/ and docs/.
    ROOT = _CHECKOUT
else:
    ROOT = Path(__file__).resolve().parent

__version__ = "0.2.0"
