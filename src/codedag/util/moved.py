"""Old import paths of moved modules: a DeprecationWarning that points at the importing line.

An alias module (``codedag.migrate.registry``) re-exports its new module's public names and calls
:func:`warn_moved` once, when it is first imported. The warning is attributed to the code that
imported it, not to Python's import machinery, so Python's default filters show it where that
code is ``__main__`` and pytest shows it in tests.
"""

from __future__ import annotations

import os
import sys
import warnings

_IMPORTLIB = os.path.join("importlib", "__init__.py")


def warn_moved(old: str, new: str) -> None:
    """Warn that module ``old`` is now ``new``; call it from ``old``'s body."""
    # warnings counts frames past importlib's bootstrap (it skips those itself) from here:
    # 1 is this function, 2 the alias module's body; ``importlib.import_module`` adds one.
    level = 3
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith(_IMPORTLIB):
            level += 1
        elif not ("importlib" in name and "_bootstrap" in name):
            break
        frame = frame.f_back  # type: ignore[assignment]
    warnings.warn(
        f"{old} moved to {new}; import it from there ({old} will be removed)",
        DeprecationWarning,
        stacklevel=level,
    )
