"""Segments of batches captured once their signature repeats and replayed after
(:mod:`codedag.backends.batched.capture`), checked on the CPU through a backend that "captures"
by keeping the function: when it captures, that replays are used, that outputs stay the eager
ones, and every way capture is refused or stopped; the real CUDA graphs under ``gpu``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from batched_counts import records, reference

import codedag.backends.batched.capture as capture
import codedag.backends.batched.fusion as fusion
from codedag.backends.batched.capture import CudaGraphs, GraphCache, Tail, identical
from codedag.backends.batched.executor import BatchExecutor
from codedag.errors import UnsupportedOperation


class FakeGraphs:
    """Captures by keeping ``fn`` and static copies of the inputs; a replay copies the inputs
    into them and calls ``fn`` (counted). ``fail``: capturing raises; ``corrupt``: replays
    return a changed result."""

    def __init__(self, fail: bool = False, corrupt: bool = False) -> None:
        self.fail = fail
        self.corrupt = corrupt
        self.captures = 0
        self.replays = 0
        self.released = 0

    def capture(self, fn: Tail, inputs: Sequence[torch.Tensor]) -> _Kept:
        self.captures += 1
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        return _Kept(self, fn, [t.clone() for t in inputs])


class _Kept:
    def __init__(self, owner: FakeGraphs, fn: Tail, static: list[torch.Tensor]) -> None:
        self.owner = owner
        self.fn = fn
        self.static = static

    def replay(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for buffer, value in zip(self.static, inputs, strict=True):
            buffer.copy_(value)
        self.owner.replays += 1
        outs = [out.clone() for out in self.fn(self.static)]
        return [outs[0] + 1, *outs[1:]] if self.owner.corrupt else outs

    def release(self) -> None:
        self.owner.released += 1


class _Calls:
    """A segment that counts its eager calls (two outputs)."""

    def __init__(self, sync: bool = False) -> None:
        self.calls = 0
        self.sync = sync

    def __call__(self, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        self.calls += 1
        out = xs[0] * 2 + xs[1]
        if self.sync and float(out.sum()) > -1e9:  # a host read
            out = out + 0
        return [out, xs[0] - 1]


def _inputs(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(4, 3, generator=g), torch.rand(4, 3, generator=g)]


def test_captured_when_the_signature_repeats_then_replayed() -> None:
    fake = FakeGraphs()
    cache = GraphCache(fake)
    fn = _Calls()
    for seed in range(5):
        xs = _inputs(seed)
        out, second = cache.run("sig", fn, xs)
        assert torch.equal(out, xs[0] * 2 + xs[1])  # each batch its own values
        assert torch.equal(second, xs[0] - 1)
    assert fake.captures == 1  # at the second batch
    assert fake.replays == 1 + 3  # the first replay compared, then batches 3 to 5
    assert (cache.stats.segments, cache.stats.eager, cache.stats.captured) == (5, 2, 1)
    assert cache.stats.replays == 3
    assert fn.calls == 2 + 4  # eager twice (new, captured), then only inside replays
    assert cache.graphs == 1


def test_a_mismatching_first_replay_refuses_the_signature(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeGraphs(corrupt=True)
    cache = GraphCache(fake)
    with caplog.at_level(logging.INFO, logger=capture.__name__):
        outs = [(cache.run("sig", _Calls(), xs)[0], xs) for xs in map(_inputs, range(4))]
    for out, xs in outs:
        assert torch.equal(out, xs[0] * 2 + xs[1])  # never the corrupted replay
    assert fake.captures == 1 and fake.released == 1
    assert cache.stats.refused == {"mismatch": 1} and cache.stats.replays == 0
    assert cache.graphs == 0
    assert [r.getMessage() for r in caplog.records if "mismatch" in r.getMessage()] == [
        "batched segment runs eagerly, not as a graph (mismatch: the first replay differs from "
        "the eager run)"
    ]


def test_a_capture_error_refuses_the_signature_and_others_still_capture() -> None:
    fake = FakeGraphs(fail=True)
    cache = GraphCache(fake)
    for xs in map(_inputs, range(4)):
        assert torch.equal(cache.run("bad", _Calls(), xs)[0], xs[0] * 2 + xs[1])
    assert fake.captures == 1  # tried once
    assert cache.stats.refused == {"error": 1}
    fake.fail = False
    for xs in map(_inputs, range(3)):
        cache.run("good", _Calls(), xs)
    assert cache.stats.captured == 1 and cache.stats.replays == 1 and cache.on


def test_a_host_sync_in_the_segment_is_never_captured() -> None:
    fake = FakeGraphs()
    cache = GraphCache(fake)
    for xs in map(_inputs, range(3)):
        cache.run("sig", _Calls(sync=True), xs)
    assert fake.captures == 0
    assert cache.stats.refused == {"sync": 1} and cache.stats.eager == 3


def test_graphs_kept_are_bounded_least_recently_replayed_dropped() -> None:
    fake = FakeGraphs()
    cache = GraphCache(fake, limit=2)
    xs = _inputs(0)
    for signature in ("a", "a", "b", "b", "a", "c", "c"):  # a captured, b captured, a replayed
        cache.run(signature, _Calls(), xs)
    assert cache.graphs == 2 and cache.stats.evicted == 1 and fake.released == 1
    replays = cache.stats.replays
    cache.run("a", _Calls(), xs)  # a was replayed after b: b went
    assert cache.stats.replays == replays + 1
    for _ in range(2):  # a dropped signature is new again: eager, then captured anew
        cache.run("b", _Calls(), xs)
    assert cache.stats.captured == 4 and cache.stats.evicted == 2


def test_signatures_that_keep_changing_turn_capture_off(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeGraphs()
    cache = GraphCache(fake)
    with caplog.at_level(logging.INFO, logger=capture.__name__):
        for i in range(capture.CHURN_LIMIT):
            cache.run(("new", i), _Calls(), _inputs(i))
    assert not cache.on and "never seen before" in cache.stats.off
    assert sum("capture off" in r.getMessage() for r in caplog.records) == 1
    for _ in range(3):
        cache.run(("new", 0), _Calls(), _inputs(0))
    assert fake.captures == 0 and cache.stats.eager == capture.CHURN_LIMIT + 3


def test_refused_signatures_turn_capture_off() -> None:
    cache = GraphCache(FakeGraphs(fail=True))
    for i in range(capture.REFUSALS_OFF):
        for _ in range(2):
            cache.run(i, _Calls(), _inputs(i))
    assert not cache.on and cache.stats.refused == {"error": capture.REFUSALS_OFF}


def test_identical_compares_bits() -> None:
    a = torch.tensor([0.0, float("nan"), 1.0])
    assert identical(a, a.clone())
    assert not identical(a, torch.tensor([-0.0, float("nan"), 1.0]))
    assert not identical(a, a.double())
    assert not identical(a, a[:2])
    assert identical(torch.empty(0, 3), torch.empty(0, 3))


# -- the executor's segments ------------------------------------------------------------------


SEGMENTS = {"demo_image": 2, "letterbox": 1}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["demo_image", "letterbox"])
def test_executor_replays_steady_batches_bit_for_bit(name: str) -> None:
    batch_records = records(name, batches=4)
    fake = FakeGraphs()
    cache = GraphCache(fake)
    captured = BatchExecutor("cpu", chunk_bytes=0, sync_free=True, capture=cache)
    eager = BatchExecutor("cpu", chunk_bytes=0, sync_free=True)
    for record in batch_records:
        got = captured.run(record)
        want = eager.run(record)
        assert np.array_equal(got.tensor.numpy(), reference(record))
        assert torch.equal(got.tensor, want.tensor)
        assert got.backend_calls == want.backend_calls and not got.failed
    # demo_image's random flips part each batch's samples otherwise: its two segments (before
    # the flip, after it) have the same signatures all the same; letterbox's ragged gather runs
    # round by round, the rest is one segment
    per_batch = SEGMENTS[name]
    assert cache.stats.captured == per_batch and fake.captures == per_batch
    assert cache.stats.replays == per_batch * (len(batch_records) - 2)
    assert cache.stats.segments == per_batch * len(batch_records) and not cache.stats.refused


def test_verified_batches_are_not_captured() -> None:
    cache = GraphCache(FakeGraphs())
    executor = BatchExecutor("cpu", chunk_bytes=0, sync_free=True, capture=cache)
    for record in records("letterbox", batches=2):
        executor.run(record, verify=True)
    assert cache.stats.segments == 0


def test_a_failing_segment_runs_round_by_round_and_its_samples_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch_records = records("letterbox", batches=3)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise UnsupportedOperation("table refused")

    monkeypatch.setattr(fusion.TableOp, "run", refuse)
    cache = GraphCache(FakeGraphs())
    executor = BatchExecutor("cpu", chunk_bytes=0, sync_free=True, capture=cache)
    for record in batch_records:
        outcome = executor.run(record)
        assert outcome.failed == list(range(record.n))  # the CPU replay, as without capture
        assert np.array_equal(outcome.tensor.numpy(), reference(record))
    assert cache.stats.segments == len(batch_records) and cache.stats.captured == 0


def test_for_device_captures_only_on_cuda() -> None:
    assert capture.for_device(torch.device("cpu")) is None
    assert capture.for_device(torch.device("cuda"), enabled=False) is None
    if torch.cuda.is_available():
        found = capture.for_device(torch.device("cuda"), limit=3)
        assert found is not None and found.limit == 3


# -- CUDA ---------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_graph_replays_new_inputs_into_outputs_of_their_own() -> None:
    cache = GraphCache(CudaGraphs())
    fn = _Calls()
    outs = []
    for seed in range(4):
        xs = [x.cuda() for x in _inputs(seed)]
        outs.append((cache.run("sig", fn, xs)[0], xs))
    assert cache.stats.captured == 1 and cache.stats.replays == 2
    for out, xs in outs:  # an output is not overwritten by later replays
        assert torch.equal(out, xs[0] * 2 + xs[1])


@pytest.mark.gpu
def test_cuda_graph_captures_constants_made_on_the_device_in_a_segment() -> None:
    def segment(xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        scale = torch.tensor([2.0, 3.0, 4.0], device=xs[0].device)
        shift = torch.as_tensor(np.ones(3, dtype=np.float32), device=xs[0].device)
        return [xs[0] * scale + shift + xs[1]]

    cache = GraphCache(CudaGraphs())
    for seed in range(4):
        xs = [x.cuda() for x in _inputs(seed)]
        expected = xs[0] * torch.tensor([2.0, 3.0, 4.0]).cuda() + 1 + xs[1]
        assert torch.equal(cache.run("sig", segment, xs)[0], expected)
    assert cache.stats.refused == {} and cache.stats.replays == 2


@pytest.mark.gpu
def test_cuda_graph_capture_refuses_a_host_sync() -> None:
    cache = GraphCache(CudaGraphs())
    for seed in range(3):
        xs = [x.cuda() for x in _inputs(seed)]
        assert torch.equal(cache.run("sig", _Calls(sync=True), xs)[0], xs[0] * 2 + xs[1])
    assert cache.stats.refused == {"sync": 1}


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["demo_image", "letterbox"])
def test_cuda_executor_replays_steady_batches_bit_for_bit(name: str) -> None:
    batch_records = records(name, batches=4)
    cache = capture.for_device(torch.device("cuda:0"))
    assert cache is not None
    executor = BatchExecutor("cuda:0", capture=cache)
    for record in batch_records:
        outcome = executor.run(record)
        assert np.array_equal(outcome.tensor.cpu().numpy(), reference(record))
    assert cache.stats.refused == {}
    assert cache.stats.replays == SEGMENTS[name] * (len(batch_records) - 2)
