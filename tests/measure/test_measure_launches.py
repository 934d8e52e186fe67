"""LaunchCounter counts aten ops and the host reads that stall a device's queue."""

from __future__ import annotations

import torch

from codedag.measure.launches import LaunchCounter


def test_counts_aten_ops_and_no_sync_for_device_side_selection() -> None:
    x = torch.arange(6.0)
    with LaunchCounter() as counted:
        y = torch.where(x > 2, x * 2, x)
    assert counted.total_ops == 3  # gt, mul, where
    assert counted.total_syncs == 0
    assert y.tolist() == [0.0, 1.0, 2.0, 6.0, 8.0, 10.0]


def test_counts_data_dependent_host_reads() -> None:
    x = torch.arange(6.0)
    with LaunchCounter() as counted:
        float(x.sum())  # item: _local_scalar_dense
        x[x > 2]  # a boolean mask: a nonzero inside
        x.nonzero()
        x.tolist()
        x.numpy()
    assert counted.syncs == {
        "aten._local_scalar_dense": 1,
        "aten.index": 1,
        "aten.nonzero": 1,
        "Tensor.tolist": 1,
        "Tensor.numpy": 1,
    }


def test_nothing_is_counted_after_the_block() -> None:
    with LaunchCounter() as counted:
        torch.ones(2).sum()
    before = counted.total_ops
    torch.ones(2).sum().item()
    assert counted.total_ops == before and counted.total_syncs == 0
