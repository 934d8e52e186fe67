"""Calibrating batched chains: the replay is the chain, batched equals per sample, figures cached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from codedag.calibrate import CalibrationCache, Stopwatch
from codedag.calibrate import chain_replay as replay
from codedag.calibrate.chains import ChainCalibrator, ChainMeasurement
from codedag.experiments import pipelines
from codedag.optimize.chains import find_chains
from codedag.trace import trace_dataloader


@pytest.fixture(scope="module")
def letterbox_chain() -> Any:
    """Letterbox (ragged inputs, helpers, operators) traced on 3 small images."""
    loader = pipelines.make_loader(
        "letterbox", batch_size=3, n=3, seed=0, img_size=32, min_size=24, max_size=40
    )
    tracer, _ = trace_dataloader(loader)
    (chain,) = find_chains(tracer.dag).candidates
    return chain


def test_replay_repeats_the_traced_steps_on_ragged_inputs(letterbox_chain: Any) -> None:
    prepared = replay.prepare(letterbox_chain.samples, 5)
    assert len(prepared.samples) == 5  # the 3 traced samples cycled to the batch size
    assert prepared.timed_steps[:4] == [
        "cv2.resize",
        "cv2.copyMakeBorder",
        "cv2.cvtColor",
        "cv2.GaussianBlur",
    ]
    # the whole chain: the normalization's statements, which the trace keeps without their
    # constant operands, are replayed with stand-ins checked against the traced shape and dtype
    assert tuple(prepared.timed_steps) == letterbox_chain.samples[0].names
    assert prepared.untimed_steps == []
    assert prepared.stand_ins == ["numpy.ndarray.astype", "operator.truediv", "operator.truediv"]
    shapes = {s.data.shape for s in prepared.samples}
    assert len(shapes) > 1  # the recorded input sizes differ per sample
    out = replay.run_original(prepared)
    assert tuple(out.shape) == (5, 3, 32, 32) and out.dtype == torch.float32


def test_operators_are_replayed_with_operands_of_their_traced_shapes(letterbox_chain: Any) -> None:
    # (x - mean) / std is one step of the trace, without its operands; broadcasting the
    # 3-element mean over an image costs about ten times a scalar, so the replay must use
    # operands of their shapes, not the scalar 1
    divisions = [s for s in letterbox_chain.samples[0].steps if s.name == "operator.truediv"]
    assert divisions[0].operands == ()  # x / 255.0: no array operand
    assert divisions[1].operands == (((3,), "float32"), ((3,), "float32"))
    prepared = replay.prepare(letterbox_chain.samples, 4)

    def stand_ins(i: int) -> list[Any]:
        return [s for s in prepared.samples[i].steps if s.name == "operator.truediv"]

    assert stand_ins(0)[0].args[1:] == (1.0,)
    mean, std = stand_ins(0)[1].args[1:]
    assert mean.shape == std.shape == (3,) and mean.dtype == np.float32
    assert stand_ins(1)[1].args[1] is mean  # one constant every sample shares, as the user's
    out = replay.run_original(prepared)
    assert out.dtype == torch.float32


def test_a_replayed_result_unlike_the_trace_ends_the_replay(letterbox_chain: Any) -> None:
    from dataclasses import replace

    def traced_as(sample: Any) -> Any:
        # the trace says the first division gave float64: the astype before it converts to
        # float64 (what it feeds), the division matches, the second one (float32 traced) does not
        steps, seen = [], False
        for step in sample.steps:
            if step.name == "operator.truediv" and not seen:
                step, seen = replace(step, out_dtype="float64"), True
            steps.append(step)
        return replace(sample, steps=steps)

    samples = [traced_as(s) for s in letterbox_chain.samples]
    prepared = replay.prepare(samples, 3)
    names = list(samples[0].names)
    cut = names.index("operator.truediv") + 1
    assert prepared.timed_steps == names[:cut]
    assert prepared.untimed_steps == names[cut:]
    assert prepared.stand_ins == ["numpy.ndarray.astype", "operator.truediv"]
    assert replay.run_original(prepared).dtype == torch.float64


def test_batched_run_equals_the_per_sample_chain_with_few_backend_calls(
    letterbox_chain: Any,
) -> None:
    prepared = replay.prepare(letterbox_chain.samples, 6)
    expected = replay.run_original(prepared)
    run = replay.run_batched(prepared, "cpu", verify=True, count_transfers=True)
    assert run.mismatches == []
    assert torch.equal(run.output, expected)
    steps = len(prepared.samples[0].steps)
    assert run.backend_calls <= steps * run.groups < steps * 6 + 1
    assert run.h2d_bytes > 0 and run.d2h_bytes == expected.numel() * expected.element_size()


def test_measurement_is_verified_timed_and_cached(letterbox_chain: Any, tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "c.json")
    calibrator = ChainCalibrator("cpu", cache=cache)
    first = calibrator.measure(letterbox_chain, 4)
    assert first.ok, first.error
    assert not first.cached
    assert first.original.samples >= 2 and first.batched.samples >= 2  # type: ignore[union-attr]
    assert first.record_ns > 0
    assert first.backend_calls >= 4 and first.h2d_bytes > 0
    second = ChainCalibrator("cpu", cache=CalibrationCache(tmp_path / "c.json"))
    again = second.measure(letterbox_chain, 4)
    assert again.cached and again.original == first.original
    assert ChainMeasurement.from_dict(first.to_dict()).to_dict() == first.to_dict()
    # another batch size is another measurement
    assert not second.measure(letterbox_chain, 2).cached


def test_on_a_device_both_ways_end_with_the_batch_there(
    letterbox_chain: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the per-sample batch is copied to the device as a training loop copies it, the batched one
    # stays where it ran: the copy back to the host is timed alone, never charged to one way
    moved: list[str] = []
    left: list[bool] = []
    real_to_device, real_run = replay.to_device, replay.run_batched

    def to_device(value: Any, device: str) -> Any:
        moved.append(device)
        return real_to_device(value, device)

    def run_batched(*args: Any, **kwargs: Any) -> Any:
        left.append(bool(kwargs.get("on_device")))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(replay, "to_device", to_device)
    monkeypatch.setattr(replay, "run_batched", run_batched)
    m = ChainCalibrator("cpu", cache=CalibrationCache(None), on_device=True).measure(
        letterbox_chain, 3
    )
    assert m.ok, m.error
    assert m.delivered == "device"
    timed = m.original.samples  # type: ignore[union-attr]
    assert moved.count("cpu") >= timed + 1  # each timed original run, and the copy alone
    assert left[0] is False  # the verifying run delivers on the host, where it is compared
    assert left[1:] and all(left[1:])
    assert ChainMeasurement.from_dict(m.to_dict()).delivered == "device"

    moved.clear()
    host = ChainCalibrator("cpu", cache=CalibrationCache(None)).measure(letterbox_chain, 3)
    assert host.delivered == "host" and host.upload_ns == host.download_ns == 0
    assert moved == []  # on the host nothing is copied


def test_a_chain_the_backends_cannot_match_is_not_timed(
    letterbox_chain: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from codedag.backends.batched.executor import BatchExecutor

    real_run = BatchExecutor.run

    def wrong(self: Any, record: Any, verify: bool = False) -> Any:
        outcome = real_run(self, record, verify)
        if verify:
            outcome.mismatches.append("cv2.resize: 3 values differ")
        return outcome

    monkeypatch.setattr(BatchExecutor, "run", wrong)
    calls = {"n": 0}

    def clock() -> int:
        calls["n"] += 1
        return calls["n"]

    calibrator = ChainCalibrator(
        "cpu", cache=CalibrationCache(None), stopwatch=Stopwatch(clock=clock)
    )
    m = calibrator.measure(letterbox_chain, 3)
    assert not m.ok and "differs" in (m.error or "")
    assert m.original is None and calls["n"] == 0  # nothing was timed


def test_an_entry_without_recorded_arguments_is_refused(letterbox_chain: Any) -> None:
    import dataclasses

    sample = letterbox_chain.samples[0]
    bare = dataclasses.replace(sample.steps[0], args=None)
    broken = type(sample)(sample.sample, [bare, *sample.steps[1:]])
    with pytest.raises(ValueError, match="no arguments"):
        replay.prepare([broken], 2)


def test_the_demo_chain_is_replayed_whole_with_positional_numpy_calls() -> None:
    # The demo's data set is user code to the tracer, so its normalization and np.transpose are
    # traced; np.transpose, recorded by parameter name, is replayed positionally as written, so
    # that it records on the deferred value instead of forcing it.
    loader = pipelines.make_loader(
        "demo_image", batch_size=4, n=4, seed=0, image_size=24, source_size=32
    )
    tracer, _ = trace_dataloader(loader)
    (chain,) = find_chains(tracer.dag).candidates
    assert chain.steps[-3:] == ["numpy.transpose", "numpy.ascontiguousarray", "torch.from_numpy"]
    prepared = replay.prepare(chain.samples, 4)
    assert prepared.untimed_steps == []
    transpose = next(s for s in prepared.samples[0].steps if s.name == "numpy.transpose")
    assert transpose.slot == "0" and transpose.args[1] == (2, 0, 1)
    expected = replay.run_original(prepared)
    run = replay.run_batched(prepared, "cpu", verify=True)
    assert run.mismatches == []
    assert torch.equal(run.output, expected)


def test_stand_ins_need_a_numpy_dtype(letterbox_chain: Any) -> None:
    from dataclasses import replace

    steps = letterbox_chain.samples[0].steps
    division = next(s for s in steps if s.name == "operator.truediv")
    for dtype, expected in (("float32", 1.0), ("torch.float32", 1.0), ("uint8", 1)):
        step = replay._stand_in(replace(division, out_dtype=dtype), None)
        assert step is not None and step.args[1] == expected and step.stand_in
    # a dtype NumPy has no name for, or none traced: the replay ends there instead of raising
    assert replay._stand_in(replace(division, out_dtype="bfloat16"), None) is None
    assert replay._stand_in(replace(division, out_dtype=None), None) is None
    astype = next(s for s in steps if s.name == "numpy.ndarray.astype")
    assert replay._stand_in(astype, replace(division, out_dtype="bfloat16")) is None
    assert replay._stand_in(astype, division).args == (np.dtype("float32"),)


class _FlippedCrops(torch.utils.data.Dataset):
    """Resize, a random flip, then a random crop (a slice the replay cannot repeat)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        import cv2

        img = np.full((40, 48, 3), index * 20, np.uint8)
        img[:, :5] = 255
        img = cv2.resize(img, (24, 24))
        if index % 2 == 0:  # what np.random.rand() < 0.5 draws, known to the test
            img = np.fliplr(img)
        y = np.random.default_rng(index).integers(0, 4)  # a NumPy integer, as a draw gives
        img = img[y : y + 20, :20].astype(np.float32) / 255.0
        return torch.from_numpy(img.transpose(2, 0, 1).copy())


def test_a_replay_that_stops_at_a_flip_is_timed(tmp_path: Path) -> None:
    # the crop's slice is not repeatable from the trace, so the replay ends at the flip, whose
    # view has negative strides, which torch refuses to collate: the original way copies it
    loader = torch.utils.data.DataLoader(_FlippedCrops(), batch_size=4)
    tracer, _ = trace_dataloader(loader)
    (chain,) = find_chains(tracer.dag).candidates
    assert "numpy.fliplr" in chain.steps
    prepared = replay.prepare(chain.samples, 4)
    assert prepared.timed_steps[-1] == "numpy.fliplr"
    expected = replay.run_original(prepared)
    run = replay.run_batched(prepared, "cpu", verify=True)
    assert run.mismatches == [] and torch.equal(run.output, expected)
    measured = ChainCalibrator("cpu", cache=CalibrationCache(tmp_path / "c.json")).measure(chain, 4)
    assert measured.ok, measured.error


class _OwnSizes(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Images resized to keep their aspect (a detection loader's), each of its own size."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> torch.Tensor:
        import cv2

        image = np.full((40, 30 + 10 * index, 3), index * 40, np.uint8)
        scale = 32 / max(image.shape[:2])
        size = (int(image.shape[1] * scale), int(image.shape[0] * scale))
        image = cv2.cvtColor(cv2.resize(image, size), cv2.COLOR_BGR2RGB)
        return torch.from_numpy(image)


def test_a_chain_whose_samples_differ_in_shape_says_so(tmp_path: Path) -> None:
    loader = torch.utils.data.DataLoader(_OwnSizes(), batch_size=4, collate_fn=list)
    tracer, _ = trace_dataloader(loader)
    (chain,) = find_chains(tracer.dag).candidates
    result = ChainCalibrator("cpu", cache=CalibrationCache(tmp_path / "c.json")).measure(chain, 4)
    assert result.error is not None
    assert result.error.startswith("its replayed samples' values differ in shape ([")
    assert result.error.endswith("]): one batch cannot hold them")


def _chain_of(*calls: tuple[int | None, int]) -> tuple[Any, Any, dict[int, int]]:
    """A candidate of one sample whose steps' library and torch times are ``calls`` (ns; a
    torch time of None: a step calibration did not measure, traced at its library time)."""
    from types import SimpleNamespace

    from codedag.calibrate.measurement import CallEstimate, Measurement
    from codedag.measure.summary import Timing

    steps, estimates, traced = [], {}, {}
    for call_id, (torch_ns, library_ns) in enumerate(calls):
        steps.append(SimpleNamespace(call_id=call_id))
        traced[call_id] = library_ns
        if torch_ns is not None:
            measured = Measurement(f"f{call_id}", "sig", "()", "cpu", "cpu")
            measured.original, measured.backend = Timing.of([library_ns]), Timing.of([torch_ns])
            estimates[call_id] = CallEstimate(measured)
    candidate = SimpleNamespace(samples=[SimpleNamespace(steps=steps)])
    return candidate, SimpleNamespace(estimate=estimates.get), traced


def test_a_chain_whose_calls_compute_far_slower_through_torch_is_not_measured_batched() -> None:
    """Batched execution runs the same backends on the same CPU: it saves each call's
    overhead and its threads divide the computation at most, so a chain whose calls compute
    through torch for more than threads times the libraries' time is not timed batched."""
    from codedag.calibrate.chains import CALL_OVERHEAD_NS, slower_per_call

    # a colour conversion 14x and a resize 31x slower through torch, an untimed division
    candidate, calibration, traced = _chain_of(
        (3_870_000, 281_000), (9_120_000, 296_000), (None, 40_000)
    )
    reason = slower_per_call(candidate, calibration, traced.__getitem__, threads=2)
    assert reason is not None and reason.startswith("not measured batched")
    assert "more than 2 thread(s) times the 0.617 ms" in reason
    # enough threads could divide it: measured
    assert slower_per_call(candidate, calibration, traced.__getitem__, threads=32) is None
    # slower per call by its overhead alone (a small array): batching may win, so it is measured
    candidate, calibration, traced = _chain_of((CALL_OVERHEAD_NS + 20_000, 30_000))
    assert slower_per_call(candidate, calibration, traced.__getitem__, threads=1) is None
