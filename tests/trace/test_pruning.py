"""Call-heavy pure Python: data-free functions stop being recorded, data-free loops followed."""

from __future__ import annotations

import numpy as np
import pytest
import trace_pipelines as pipelines

from codedag.errors import ConfigError
from codedag.trace import EnhancedTracer


def names(tracer: EnhancedTracer, name: str) -> int:
    return sum(1 for n in tracer.dag.calls() if n.name == name)


def test_a_data_free_helper_is_recorded_prune_after_times() -> None:
    expected = sum(i % 97 for i in range(500))
    tracer = EnhancedTracer(track_memory=False, prune_after=16)
    with tracer.tracing_context():
        total = pipelines.score(500)
    assert total == expected
    assert names(tracer, "trace_pipelines.tokenize") == 16
    meta = tracer.dag.metadata["tracer"]
    assert meta["pruned"] == ["trace_pipelines.tokenize"] and meta["prune_after"] == 16
    tracer.dag.self_check()


def test_functions_that_touch_data_are_never_pruned() -> None:
    arrays = [np.full(4, i, dtype=np.float32) for i in range(40)]
    tracer = EnhancedTracer(track_memory=False, prune_after=8)
    with tracer.tracing_context():
        pipelines.scale_all(arrays)
    assert names(tracer, "trace_pipelines.halve") == 40
    assert names(tracer, "operator.mul") == 40  # each call made a step
    assert tracer.dag.metadata["tracer"]["pruned"] == []


def test_prune_after_none_records_every_call_and_follows_every_line() -> None:
    tracer = EnhancedTracer(track_memory=False, prune_after=None)
    with tracer.tracing_context():
        pipelines.score(600)
    assert names(tracer, "trace_pipelines.tokenize") == 600
    meta = tracer.dag.metadata["tracer"]
    assert meta["pruned"] == [] and meta["lines_stopped"] == []
    assert meta["line_events"] >= 1200


def test_a_long_loop_without_steps_stops_being_followed() -> None:
    tracer = EnhancedTracer(track_memory=False)
    with tracer.tracing_context():
        pipelines.score(2000)
    meta = tracer.dag.metadata["tracer"]
    assert meta["lines_stopped"] == ["trace_pipelines.score"]
    assert meta["line_events"] < 1500


def test_prune_after_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="prune_after must be an integer >= 1 or None, got 0"):
        EnhancedTracer(prune_after=0)
