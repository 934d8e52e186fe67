"""Plans kept across runs: the next run of the same pipeline applies its plan from the first batch.

A plan is stored under ``<user cache>/plans/<key>.json`` (``$CODEDAG_CACHE_DIR`` overrides the
platform's cache folder). The key hashes what the plan depends on: the dataset class's source and
its module file's content (the pipeline's code), the versions of codedag, Python and the libraries
the pipeline calls, and the device it was planned for. Changing any of them makes another key, so
a stale plan is never applied; ``codedag run --replan`` plans again and replaces the stored one.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PLANS_FOLDER = "plans"
_LIBRARIES = ("torch", "numpy", "cv2", "PIL", "librosa", "scipy")


def plans_folder() -> Path:
    """``$CODEDAG_CACHE_DIR/plans``, else ``plans`` under the platform's user cache folder."""
    override = os.environ.get("CODEDAG_CACHE_DIR", "").strip()
    if override:
        return Path(override) / PLANS_FOLDER
    import platformdirs

    return Path(platformdirs.user_cache_dir("codedag")) / PLANS_FOLDER


def _code_of(kind: type) -> str:
    """The dataset class's source and its module file's content ('' where there is none)."""
    parts = []
    try:
        parts.append(inspect.getsource(kind))
    except (OSError, TypeError):
        parts.append(f"{kind.__module__}.{kind.__qualname__}")
    module = sys.modules.get(kind.__module__)
    path = getattr(module, "__file__", None)
    if path:
        with contextlib.suppress(OSError):
            parts.append(Path(path).read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def library_versions() -> dict[str, str]:
    """codedag's, Python's and the imported pipeline libraries' versions."""
    from codedag.version import __version__

    versions = {"codedag": __version__, "python": platform.python_version()}
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None) if module is not None else None
        if version:
            versions[name] = str(version)
    return versions


def plan_key(loader: Any, device: str) -> str:
    """The key of ``loader``'s pipeline on ``device`` (hex, 24 characters)."""
    dataset = getattr(loader, "dataset", None)
    text = json.dumps(
        [_code_of(type(dataset)), sorted(library_versions().items()), device], sort_keys=True
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def plan_path(key: str) -> Path:
    """Where the plan of ``key`` is stored."""
    return plans_folder() / f"{key}.json"


def load_plan(key: str) -> dict[str, Any] | None:
    """The stored plan of ``key``, or None (none stored, or unreadable: logged)."""
    path = plan_path(key)
    if not path.is_file():
        return None
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        log.warning("stored plan %s is unreadable (%s); planning again", path, error)
        return None
    return plan if isinstance(plan, dict) else None


def save_plan(key: str, plan: dict[str, Any]) -> Path | None:
    """Store ``plan`` under ``key``; return its path (None when it cannot be written: logged)."""
    from codedag.util.io import atomic_write_json

    path = plan_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_json(path, plan)
    except Exception as error:  # a full or read-only disk must not stop the script
        log.warning("could not store the plan in %s: %s", path, error)
        return None
