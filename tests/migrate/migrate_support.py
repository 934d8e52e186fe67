"""Small exact torch backends and plan builders for the migration tests.

They follow the backend contract (codedag/migrate/ops/__init__.py) so the tests of the migration
machinery do not depend on which library backends exist.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.registry import Registry, spec_from_backend

CALLS: dict[str, int] = {"flip": 0, "add": 0, "clip": 0, "boom": 0}


def flip(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """cv2.flip on a batch (N, H, W[, C])."""
    CALLS["flip"] += 1
    if dst is not None:
        raise UnsupportedOperation("dst")
    if flipCode == 0:
        return src.flip(1)
    if flipCode > 0:
        return src.flip(2)
    return src.flip(1).flip(2)


def add(src1: torch.Tensor, src2: Any, dst: Any = None, mask: Any = None, dtype: int = -1) -> Any:
    """cv2.add of two uint8 batches with saturation."""
    CALLS["add"] += 1
    if mask is not None or dtype != -1 or not isinstance(src2, torch.Tensor):
        raise UnsupportedOperation("only two arrays")
    if src1.dtype != torch.uint8 or src2.dtype != torch.uint8:
        raise UnsupportedOperation("uint8 only")
    return (src1.to(torch.int16) + src2.to(torch.int16)).clamp(0, 255).to(torch.uint8)


def clip(a: torch.Tensor, a_min: Any = None, a_max: Any = None, out: Any = None) -> torch.Tensor:
    """numpy.clip for float arrays with scalar bounds (dtype preserved)."""
    CALLS["clip"] += 1
    if not a.is_floating_point():
        raise UnsupportedOperation("floats only")
    return a.clamp(a_min, a_max)


def sin(x: torch.Tensor, out: Any = None) -> torch.Tensor:
    """numpy.sin for float arrays (a ufunc: its replacement is a proxy object)."""
    return torch.sin(x)


def boom(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """A backend that always fails."""
    CALLS["boom"] += 1
    raise RuntimeError("injected failure")


def make_registry(**overrides: Any) -> Registry:
    """A registry with cv2.flip, cv2.add and numpy.clip test backends (overridable)."""
    backends = {"cv2.flip": flip, "cv2.add": add, "numpy.clip": clip, **overrides}
    registry = Registry()
    for name, backend in backends.items():
        module = name.split(".", 1)[0]
        registry.register(spec_from_backend(name, backend, module))
    return registry


def plan_for(mapping: dict[str, Any], calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A contract plan dict from ``{context key: device}``."""
    return {
        "schema_version": 1,
        "codedag_version": "0.1.0",
        "k": 2,
        "gpu_count": 1,
        "target_device": "cpu",
        "partition_device_map": {"0": "cpu", "1": "cpu"},
        "context_device_map": dict(mapping),
        "calls": list(calls or []),
        "notes": [],
    }


T = TypeVar("T")


def call_within(seconds: float, func: Callable[[], T]) -> T:
    """``func()``, failing the test if it has not returned after ``seconds`` (it may hang)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = func()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{getattr(func, '__name__', func)} still blocked after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)
