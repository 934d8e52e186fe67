"""One library call through the migrated path, without patching anything.

Calibration times a function's backend exactly as a migrated call runs it (values converted in,
backend, values converted back to what the library returns) but needs no plan and no patch:
:func:`migrated_call` gives that path as a plain callable. Unlike a patched call it never falls
back to the original: a failure raises, so a backend that cannot run a traced signature is seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.backends.registry import Registry, default_registry
from codedag.errors import MigrationError
from codedag.patching import resolve


def original_function(name: str) -> Callable[..., Any]:
    """The library function a canonical name designates (the object a patch would replace).

    Raises:
        MigrationError: the name does not resolve in this environment.
    """
    _owner, _attr, value = resolve(name)
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if not callable(value):
        raise MigrationError(f"{name} is not callable here ({type(value).__name__})")
    return value


def migrated_call(
    name: str, device: str = "cpu", registry: Registry | None = None
) -> Callable[..., Any]:
    """A callable running ``name`` through its backend on ``device``, as a migrated call does.

    Args:
        name: canonical function name (``cv2.resize``).
        device: ``cpu`` or ``cuda:i``.
        registry: the registry (default: the process-wide one).

    Raises:
        MigrationError: ``name`` has no backend (unknown or NonMigratable).
    """
    registry = registry if registry is not None else default_registry()
    spec = registry.get(name)
    if spec is None:
        raise MigrationError(f"{name} has no torch backend in the registry")
    executor = Executor(spec, original_function(name), {device: ValueConverter(device)})

    def call(*args: Any, **kwargs: Any) -> Any:
        return executor.run(args, dict(kwargs), device)

    call.__name__ = f"migrated_{name.rsplit('.', 1)[-1]}"
    return call
