"""PatchInjector: installs one UniversalWrapper per planned function through codedag.patching.

Only functions that the plan migrates *and* the registry knows are patched. A plan naming a
NonMigratable function (I/O, decoders, ``os.system``) is refused as a whole with a
:class:`MigrationError`; a name the registry does not know is skipped with a warning. All patches
go through :class:`codedag.patching.Patcher`, which also rebinds references bound at import time
(``from cv2 import resize``) and restores the exact original objects.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from codedag.errors import MigrationError
from codedag.migrate.context import ContextMatcher, Placement
from codedag.migrate.registry import Registry
from codedag.migrate.values import ValueConverter
from codedag.migrate.wrapper import UniversalWrapper
from codedag.patching import Patcher, resolve

log = logging.getLogger(__name__)


class PatchInjector:
    """Patch the planned functions; restore them.

    Args:
        entries: function -> ``[(context key, placement)]`` with placements already mapped to
            devices that exist in this process (``None``: keep the original).
        registry: the registry deciding what may be patched.
        converters: shared value converters, one per device.
    """

    def __init__(
        self,
        entries: Mapping[str, list[tuple[str, Placement]]],
        registry: Registry,
        converters: dict[str, ValueConverter],
    ) -> None:
        self.entries = entries
        self.registry = registry
        self.converters = converters
        self.wrappers: dict[str, UniversalWrapper] = {}
        self.skipped: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self._patcher = Patcher("migrate")
        self._lock = threading.RLock()

    def check(self) -> list[str]:
        """The functions that would be patched; raises for NonMigratable ones.

        Raises:
            MigrationError: the plan migrates a function that must stay on the CPU.
        """
        refused = []
        wanted = []
        for name, placements in sorted(self.entries.items()):
            if all(p is None for _key, p in placements):
                continue
            reason = self.registry.non_migratable.get(name)
            if reason is not None:
                refused.append(f"{name} ({reason})")
            elif self.registry.get(name) is None:
                self.skipped[name] = "not in the registry of migratable functions"
            else:
                wanted.append(name)
        if refused:
            raise MigrationError(
                "the plan migrates functions that must stay on the CPU: "
                + ", ".join(refused)
                + "; expected only names from list_supported_functions()"
            )
        for name, why in self.skipped.items():
            log.warning("skipping %s: %s", name, why)
        return wanted

    def apply_all(self) -> dict[str, int]:
        """Patch every planned, known function; returns ``{'patched', 'failed', 'skipped'}``."""
        with self._lock:
            if self._patcher.records():
                return {"patched": 0, "failed": 0, "skipped": 0}
            self.skipped.clear()
            self.failed.clear()
            wanted = self.check()
            resolvable = []
            for name in wanted:
                try:
                    resolve(name)
                except MigrationError as error:
                    self.failed[name] = str(error)
                    log.warning("cannot patch %s: %s", name, error)
                    continue
                resolvable.append(name)
            self._patcher.patch_many(resolvable, self._factory)
            return {
                "patched": len(resolvable),
                "failed": len(self.failed),
                "skipped": len(self.skipped),
            }

    def _factory(self, name: str, original: Any) -> Any:
        spec = self.registry.get(name)
        if spec is None:  # checked before; the registry changed in between
            raise MigrationError(f"{name!r} left the registry while patching")
        matcher = ContextMatcher(name, self.entries[name])
        if matcher.conflicts:
            log.info(
                "%s: %d context(s) are placed differently across traced samples; the runtime "
                "uses each context's majority placement",
                name,
                matcher.conflicts,
            )
        wrapper = UniversalWrapper(spec, original, matcher, self.converters)
        self.wrappers[name] = wrapper
        return wrapper.function

    def restore_all(self) -> int:
        """Put back the exact original objects; returns how many functions were restored."""
        with self._lock:
            return self._patcher.restore()

    def patched_names(self) -> list[str]:
        """Functions patched right now."""
        return sorted(self._patcher.records())
