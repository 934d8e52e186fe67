"""Where a plan file may put the prefix cache: inside the user's own cache folders only.

A plan may come from elsewhere, and its ``cache.folder`` (``"../../x"``, ``"/etc/x"``) would
otherwise make codedag create a store wherever the plan says. A folder from a plan is used only
when it lies, once links and ``..`` are resolved, inside the user cache directory
(``$CODEDAG_CACHE_DIR``, else the platform's, via platformdirs) or ``$CODEDAG_PREFIX_CACHE_DIR``
(or another root the caller trusts, such as a run's output folder); otherwise it is refused with
one warning and the default folder is used. A folder the user gives (a command-line flag,
``StoreSettings(folder=...)``) is the user's own and is never confined.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from codedag.store.tiers import ENV_FOLDER, default_folder
from codedag.util.paths import user_cache_dir
from codedag.util.text import printable

log = logging.getLogger(__name__)


def trusted_roots() -> list[Path]:
    """The folders a plan's cache folder may lie in: the user cache directory and the prefix
    cache's default folder (``$CODEDAG_PREFIX_CACHE_DIR`` when set)."""
    return [user_cache_dir(), default_folder()]


def plan_cache_folder(folder: str, roots: Sequence[Path] | None = None) -> Path | None:
    """The cache folder a plan names, or None (the default folder) when it lies outside
    ``roots`` (default :func:`trusted_roots`), with one warning naming it.

    Args:
        folder: the plan's ``cache.folder`` (relative: to the current folder).
        roots: the folders it may lie in.
    """
    path = Path(folder)
    allowed = trusted_roots() if roots is None else list(roots)
    try:
        resolved = path.resolve()  # links and ".." resolved: no way out through either
        inside = any(resolved.is_relative_to(root.resolve()) for root in allowed)
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of links
        inside = False
    if inside:
        return path
    log.warning(
        "prefix cache: the plan's cache folder %s lies outside the user cache (%s) and $%s; "
        "using the default folder %s instead (to use it, set $%s to it or pass "
        "StoreSettings(folder=...))",
        printable(folder, 200),
        user_cache_dir(),
        ENV_FOLDER,
        default_folder(),
        ENV_FOLDER,
    )
    return None
