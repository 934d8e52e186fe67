"""What a batched chain asks of a device per batch, counted on the CPU: aten ops (each at
least one kernel launch on a GPU) and data-dependent host syncs (each a stall), with the
executor running as on a device (the whole batch, no host reads); the batches stay the
per-sample reference's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from batched_counts import count, records, reference

MAX_OPS_PER_CHAIN_OP = {"demo_image": 10.0, "letterbox": 10.0}
"""aten ops per chain op in a steady batch, views included. Measured: demo_image 8.4 (88 ops
for 10.5 steps a sample; the per-sample warps take 62 of them: 14 for the inverse matrices, 22
for the source coordinates rounded once as cv2's fma rounds them (15 of those the rounding), 26
for the border rule, one gather of every tap and the lerps; 27 of the 88 are views that launch
no kernel), letterbox 4.2 (46 ops for 11 steps: the samples' resizes and borders of different
sizes run as one padded gather, not one call per size): a change that adds launches shows here."""


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["demo_image", "letterbox"])
def test_steady_batches_have_no_host_sync_and_few_ops(name: str) -> None:
    batch_records = records(name, batches=3)
    counts = count(batch_records)
    assert counts.steady_syncs == 0, counts.sync_names
    assert counts.failed == 0  # every group ran its backend, none its CPU replay
    assert counts.ops_per_chain_op <= MAX_OPS_PER_CHAIN_OP[name]
    for record, out in zip(batch_records, counts.outputs, strict=True):
        assert np.array_equal(out.numpy(), reference(record))
