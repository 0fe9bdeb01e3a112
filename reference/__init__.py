"""lmspec reference implementation of shared/SPEC.md.

Every function and dataclass in the ``reference`` package is checked at runtime
by jaxtyping + beartype: this module installs the jaxtyping import hook before
any submodule is imported. Set ``JAXTYPING_DISABLE=1`` to turn the checks off
(no hook is installed then, so the overhead is exactly zero).
"""

from jaxtyping import config as _jaxtyping_config
from jaxtyping import install_import_hook as _install_import_hook

TYPECHECKED: bool = not _jaxtyping_config.jaxtyping_disable
if TYPECHECKED:
    # Left installed on purpose: submodules are imported lazily by users.
    # under the name this package was imported as (lmspec.reference; plain
    # "reference" only inside a sandbox that shows it to lmspec's own adapters)
    _install_import_hook(__name__, "beartype.beartype")

__version__ = "0.1.0"
