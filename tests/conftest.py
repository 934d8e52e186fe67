"""Shared fixtures and markers: gpu tests skip without CUDA."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA (none available here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _no_leaked_hooks_or_patches() -> Iterator[None]:
    """Fail a test that leaves a profile/trace hook installed or anything patched."""
    from codedag.patching import active_patches

    before = (sys.getprofile(), sys.gettrace())
    yield
    after = (sys.getprofile(), sys.gettrace())
    if after != before:
        sys.setprofile(before[0])
        sys.settrace(before[1])
        pytest.fail(f"test left a tracing hook installed: profile={after[0]!r} trace={after[1]!r}")
    leaked = active_patches()
    if leaked:
        pytest.fail(f"test left functions patched: {', '.join(leaked)}")
