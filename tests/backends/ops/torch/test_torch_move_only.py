"""torch functions called on CPU tensors (MoveOnly): the original function runs on the device
with its tensors moved there, and the result comes back to the caller's device, unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from migrate_support import refusal

from codedag.backends.contract import MoveOnly
from codedag.backends.ops import torch as torch_ops
from codedag.backends.probe import migrated_call, original_function
from codedag.backends.registry import default_registry
from codedag.backends.tolerances import difference

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def test_every_declared_name_is_a_move_only_op_of_the_registry() -> None:
    registry = default_registry()
    for name in torch_ops.TORCH_MOVE_ONLY:
        spec = registry.get(name)
        assert spec is not None, name
        assert spec.strategy is MoveOnly and spec.backend is None and spec.library == "torch"


@pytest.mark.parametrize("device", DEVICES)
def test_the_original_runs_on_the_device_and_returns_to_the_callers(device: str) -> None:
    x = torch.randn(2, 3, 9, 11, generator=torch.Generator().manual_seed(0))
    w = torch.randn(4, 3, 3, 3, generator=torch.Generator().manual_seed(1))
    name = registry_name(torch.conv2d)
    got = migrated_call(name, device)(x, w, padding=1)
    assert got.device == x.device
    if device == "cpu":  # the same function: bit-exact
        torch.testing.assert_close(got, torch.conv2d(x, w, padding=1), rtol=0, atol=0)
    assert difference(name, torch.conv2d(x, w, padding=1), got) is None
    pooled = migrated_call(registry_name(F.avg_pool2d), device)(x, 2)
    torch.testing.assert_close(pooled, F.avg_pool2d(x, 2), rtol=0, atol=0)


def test_an_output_buffer_is_left_to_torch() -> None:
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    assert refusal("torch.matmul", a, b, out=torch.empty(2, 2)) == (
        "out= writes into a caller's buffer"
    )
    assert refusal("torch.matmul", a, b) is None


def test_integer_matmul_stays_with_torch_where_cuda_has_no_kernel() -> None:
    ints = torch.ones(2, 2, dtype=torch.int64)
    assert "no integer matrix product" in str(refusal("torch.matmul", ints, ints))
    assert refusal("torch.matmul", torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)) is None


def registry_name(func: object) -> str:
    """The canonical name the registry files a torch function under."""
    registry = default_registry()
    for name in torch_ops.TORCH_MOVE_ONLY:
        canonical = registry.canonical(name)
        if original_function(canonical) is func:
            return canonical
    raise AssertionError(f"{func} is not declared")
