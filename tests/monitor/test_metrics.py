"""Loss and accuracy logging: blocks, summaries, non-finite values, bounded memory."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from codedag.errors import ConfigError
from codedag.monitor.metrics import MetricsLogger, _Track
from codedag.monitor.records import MetricRecord
from codedag.monitor.stats import Downsampler


def test_series_and_summary_of_logged_values() -> None:
    metrics = MetricsLogger()
    for batch, loss in enumerate([2.0, 1.0, 1.5]):
        metrics.log_loss(0, batch, loss)
    metrics.log_accuracy(0, 2, np.float32(0.5))
    metrics.log_accuracy(1, 0, torch.tensor(0.75))
    assert metrics.series() == {
        "losses": [[0, 0, 2.0], [0, 1, 1.0], [0, 2, 1.5]],
        "accuracies": [[0, 2, 0.5], [1, 0, 0.75]],
    }
    summary = metrics.summary()
    assert summary["loss"] == {
        "initial": 2.0, "final": 1.5, "min": 1.0, "max": 2.0, "count": 3, "nonfinite": 0
    }  # fmt: skip
    assert summary["accuracy"] == {
        "initial": 0.5, "final": 0.75, "best": 0.75, "count": 2, "nonfinite": 0
    }  # fmt: skip


def test_nothing_logged_summarizes_as_none() -> None:
    assert MetricsLogger().summary() == {"loss": None, "accuracy": None}


def test_non_finite_values_are_counted_passed_on_and_kept_out_of_the_series() -> None:
    received: list[MetricRecord] = []
    metrics = MetricsLogger(on_metrics=received.extend)
    metrics.log_loss(0, 0, math.nan)
    metrics.log_loss(0, 1, math.inf)
    assert metrics.summary()["loss"] == {"count": 0, "nonfinite": 2}
    assert len(received) == 2 and math.isnan(received[0].value)
    metrics.log_loss(0, 2, 3.0)
    assert metrics.summary()["loss"]["nonfinite"] == 2
    assert metrics.series()["losses"] == [[0, 2, 3.0]]


def test_values_reach_the_sink_in_blocks_with_their_step_and_time() -> None:
    blocks: list[list[MetricRecord]] = []
    metrics = MetricsLogger(on_metrics=blocks.append)
    for batch in range(130):
        metrics.log_loss(0, batch, 1.0, step=batch, time_s=0.5)
    assert len(blocks) == 1 and len(blocks[0]) == 128  # folded when the block filled
    assert blocks[0][5] == MetricRecord("loss", 0, 5, 1.0, 5, 0.5)
    metrics.fold()
    assert [len(b) for b in blocks] == [128, 2]
    metrics.fold()
    assert len(blocks) == 2  # nothing buffered: nothing sent


def test_long_series_are_downsampled_to_the_capacity() -> None:
    metrics = MetricsLogger(downsample_capacity=16)
    for batch in range(1000):
        metrics.log_loss(0, batch, float(batch))
    points = metrics.series()["losses"]
    assert len(points) <= 16
    assert metrics.strides()["losses"] > 1
    assert metrics.summary()["loss"]["count"] == 1000
    assert metrics.summary()["loss"]["max"] == 999.0


def test_a_value_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ConfigError, match="loss must be a number, got str"):
        MetricsLogger().log_loss(0, 0, "low")
    with pytest.raises(ConfigError, match="accuracy must be a number"):
        MetricsLogger().log_accuracy(0, 0, None)


def test_a_folded_block_equals_the_values_added_one_at_a_time() -> None:
    """Folding a metric's values block by block gives the series (means summed in another
    order), extremes and counts of its finite values added one at a time, non-finite values
    counted and the downsampling included."""
    rng = random.Random(3)
    values = [rng.uniform(-5, 5) for _ in range(700)]
    for i in (3, 50, 51, 400):
        values[i] = float("nan") if i % 2 else float("inf")
    keys = [(i // 100, i % 100) for i in range(len(values))]
    block = _Track(64)
    for start in range(0, len(values), 37):
        block.add_many(keys[start : start + 37], values[start : start + 37])
    finite = [(k, v) for k, v in zip(keys, values) if math.isfinite(v)]
    one = Downsampler(64, width=1)
    for key, value in finite:
        one.add(key, value)
    expected = [[x[0], x[1], y] for x, y in one.points()]
    assert [p[:2] for p in block.points()] == [p[:2] for p in expected]
    assert [p[2] for p in block.points()] == pytest.approx([p[2] for p in expected])
    kept = [v for _, v in finite]
    assert (block.first, block.last, block.min, block.max) == (
        kept[0],
        kept[-1],
        min(kept),
        max(kept),
    )
    assert (block.count, block.nonfinite) == (one.count, 4) == (696, 4)
