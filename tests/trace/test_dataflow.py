"""Dataflow through real pipeline code: helper returns, operators, methods, slices (steps)."""

from __future__ import annotations

import itertools
import operator

import cv2
import numpy as np
import pytest
import real_pipelines as rp

from codedag.graph import ExecutionDAG
from codedag.trace import EnhancedTracer
from codedag.trace.rebuild import rebuild_arguments

IMG = np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8)


def trace(fn, *args, **options):
    tracer = EnhancedTracer(**options)
    with tracer.tracing_context():
        out = fn(*args)
    tracer.dag.self_check()
    return tracer.dag, out


def named(dag: ExecutionDAG, name: str) -> list:
    return [n for n in dag.calls() if n.name == name]


def flows(dag: ExecutionDAG, source: int, target: int) -> bool:
    """Whether data flows from call ``source`` to call ``target`` (produces/uses edges)."""
    seen, todo = {source}, [source]
    while todo:
        node = todo.pop()
        for nxt in dag.dataflow_successors(node):
            if nxt == target:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def chain(dag: ExecutionDAG, *names: str) -> None:
    nodes = [named(dag, n)[0] for n in names]
    for a, b in itertools.pairwise(nodes):
        assert flows(dag, a.id, b.id), f"no dataflow {a.name} -> {b.name}"


def test_a_helper_return_keeps_the_chain() -> None:
    dag, _ = trace(rp.detect_sample, IMG)
    chain(dag, "cv2.resize", "cv2.cvtColor", "cv2.GaussianBlur")
    (resize,) = named(dag, "cv2.resize")
    (helper,) = named(dag, "real_pipelines.resize_only")
    (cvt,) = named(dag, "cv2.cvtColor")
    # the helper returns what resize made: one value node, produced by both, used by cvtColor
    (value,) = dag.successors(resize.id, "produces")
    assert dag.successors(helper.id, "produces") == [value]
    assert dag.successors(value, "uses") == [cvt.id]
    assert dag.nodes[value].version == 0


def test_letterbox_helper_links_resize_to_the_padded_result() -> None:
    def sample(img):
        img = rp.letterbox(img)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        return cv2.GaussianBlur(img, (3, 3), 0)

    dag, out = trace(sample, IMG)
    assert out.shape == (64, 64, 3)
    chain(dag, "cv2.resize", "cv2.copyMakeBorder", "cv2.cvtColor", "cv2.GaussianBlur")


def test_normalize_written_with_operators_becomes_steps() -> None:
    dag, out = trace(rp.classify_sample, IMG)
    assert out.shape == (3, 60, 80) and out.dtype == np.float32
    names = [n.name for n in dag.calls() if n.depth == 1]
    assert names == [
        "cv2.GaussianBlur",
        "numpy.ndarray.astype",
        "operator.truediv",
        "operator.truediv",
        "numpy.ndarray.transpose",
        "numpy.ascontiguousarray",
    ]
    chain(dag, "cv2.GaussianBlur", "numpy.ndarray.astype", "numpy.ndarray.transpose")
    chain(dag, "numpy.ndarray.transpose", "numpy.ascontiguousarray")
    scale, normalize = named(dag, "operator.truediv")
    assert flows(dag, scale.id, normalize.id)
    (scaled,) = dag.successors(scale.id, "produces")
    assert (dag.nodes[scaled].shape, dag.nodes[scaled].dtype) == ([60, 80, 3], "float32")
    (transpose,) = named(dag, "numpy.ndarray.transpose")
    (chw,) = dag.successors(transpose.id, "produces")
    assert dag.nodes[chw].shape == [3, 60, 80]
    # (img - MEAN) / STD reads the module-level constants too
    inputs = [dag.nodes[v] for v in dag.predecessors(normalize.id, "uses")]
    assert sorted(v.shape for v in inputs) == [[3], [3], [60, 80, 3]]
    assert normalize.context_key == "real_pipelines.classify_sample#0/operator.truediv#1"
    assert normalize.is_builtin and normalize.call_site.endswith("real_pipelines.py:49")
    (root,) = named(dag, "real_pipelines.classify_sample")
    assert sum(n.total_ns for n in dag.calls() if n.depth == 1) <= root.total_ns


def test_mosaic_canvas_filled_by_slice_assignment() -> None:
    dag, out = trace(rp.mosaic, [IMG, IMG[::-1], IMG[:, ::-1], IMG])
    assert out.shape == (64, 64, 3)
    resizes = named(dag, "cv2.resize")
    setitems = named(dag, "operator.setitem")
    (warp,) = named(dag, "cv2.warpAffine")
    assert len(resizes) == len(setitems) == 4
    for resize in resizes:
        assert flows(dag, resize.id, warp.id)
    (full,) = named(dag, "numpy.full")
    assert flows(dag, full.id, warp.id)
    versions = [dag.nodes[dag.successors(s.id, "produces")[0]].version for s in setitems]
    assert versions == [1, 2, 3, 4]  # each paste makes a new version of the canvas
    # the last paste: canvas[32:64, 32:64] = tile, rebuilt and applied to a fresh canvas
    args, kwargs = rebuild_arguments(setitems[-1].args)
    assert args[1] == (slice(32, 64, None), slice(32, 64, None)) and not kwargs
    canvas = args[0].copy()
    operator.setitem(canvas, args[1], args[2])
    np.testing.assert_array_equal(canvas[32:, 32:], args[2])


def test_mel_pipeline_through_slicing_and_min_max_arithmetic() -> None:
    pytest.importorskip("librosa")
    rp.mel_pipeline()  # warm: librosa compiles on first use
    dag, out = trace(rp.mel_pipeline)
    assert out.dtype == np.float32 and out.min() >= 0 and out.max() <= 1
    chain(
        dag,
        "real_pipelines.load_audio",
        "operator.getitem",
        "librosa.feature.spectral.melspectrogram",
        "librosa.core.spectrum.power_to_db",
    )
    (power,) = named(dag, "librosa.core.spectrum.power_to_db")
    inside = "real_pipelines.mel_features#0/"
    normalize = [n for n in named(dag, "operator.truediv") if inside in n.context_key]
    (astype,) = [n for n in named(dag, "numpy.ndarray.astype") if inside in n.context_key]
    assert len(normalize) == 1 and flows(dag, power.id, normalize[0].id)
    assert flows(dag, normalize[0].id, astype.id)
    (getitem,) = named(dag, "operator.getitem")
    (half,) = dag.successors(getitem.id, "produces")
    assert dag.nodes[half].shape == [8000]


def _window_level(img: np.ndarray, lo: float = 10.0, hi: float = 200.0) -> np.ndarray:
    # operators in the arguments of recorded calls, the statements binding only their results
    scan = np.clip((img.astype(np.float32) - lo) / (hi - lo), 0.0, 1.0)
    small = cv2.resize(scan * 2.0, (20, 15))
    return np.pad(small[::2] - 1.0, 1)


def test_operations_in_a_recorded_calls_arguments_produce_the_value_it_received() -> None:
    dag, out = trace(_window_level, IMG)
    assert out.shape == (10, 22, 5)
    chain(dag, "numpy.ndarray.astype", "operator.truediv", "numpy.clip")
    chain(dag, "numpy.clip", "operator.mul", "cv2.resize", "operator.sub", "numpy.pad")
    (resize,) = named(dag, "cv2.resize")
    (received,) = [v for v in dag.predecessors(resize.id, "uses")]
    assert [dag.nodes[c].name for c in dag.predecessors(received, "produces")] == ["operator.mul"]


def test_np_concatenate_is_named_and_linked_to_the_operator_after_it() -> None:
    dag, out = trace(rp.two_channels, np.ones(3), np.zeros(4))
    assert out.shape == (7,)
    (concat,) = named(dag, "numpy.concatenate")
    (mul,) = named(dag, "operator.mul")
    assert dag.dataflow_successors(concat.id) == [mul.id]
    assert [e["name"] for e in concat.args] == ["0", "axis"]
    args, _ = rebuild_arguments(mul.args)
    assert args[0].shape == (7,) and args[1] == 0.5


def test_in_place_operators_and_returned_tuples() -> None:
    def sample(img):
        x = img.astype(np.float32)
        x *= 2.0
        return x / 255.0, 3

    dag, (_, label) = trace(sample, IMG)
    assert label == 3
    (imul,) = named(dag, "operator.imul")
    (astype,) = named(dag, "numpy.ndarray.astype")
    (div,) = named(dag, "operator.truediv")
    (x0,) = dag.successors(astype.id, "produces")
    (x1,) = dag.successors(imul.id, "produces")
    assert dag.nodes[x1].version == dag.nodes[x0].version + 1  # same array, written in place
    assert flows(dag, astype.id, imul.id) and flows(dag, imul.id, div.id)
    produced = dag.successors(div.id, "produces")
    assert [dag.nodes[v].shape for v in produced] == [[60, 80, 3]]


def test_chained_methods_writing_in_place_leave_the_dag_acyclic() -> None:
    """``t.clamp(0, 1).sub_(0.5).div_(0.5)``: each method writes into the tensor it received
    and returns it; the tensor keeps its node, which no method after it produces."""
    import torch

    def sample(img):
        t = torch.from_numpy(img).permute(2, 0, 1).float().div(255.0)
        return t.clamp(0.0, 1.0).sub_(0.5).div_(0.5)

    dag, out = trace(sample, IMG)  # self_check: a cycle raises GraphError
    assert float(out.min()) >= -1.0
    (clamp,) = named(dag, "torch._C.TensorBase.clamp")
    (sub,) = named(dag, "torch._C.TensorBase.sub_")
    (value,) = dag.successors(clamp.id, "produces")
    assert dag.predecessors(sub.id, "uses") == [value]
    assert dag.successors(sub.id, "produces") == []


def test_a_number_a_recorded_call_computes_from_data_flows_into_the_operator_taking_it() -> None:
    """``img / np.max(img)``: NumPy's function returns a scalar, which the division takes as it
    takes a C method's value (not as a constant); a number that only decides a branch (``if
    np.max(img) > 1``) goes to nothing."""

    def sample(img):
        x = img.astype(np.float32)
        if np.min(x) >= 0:
            x = x - np.mean(x)
        return x / np.max(x)

    dag, _ = trace(sample, IMG)
    (maximum,) = named(dag, "numpy.max")
    (minimum,) = named(dag, "numpy.min")
    (division,) = named(dag, "operator.truediv")
    assert flows(dag, maximum.id, division.id)
    assert not dag.successors(minimum.id, "produces")
    (mean,) = named(dag, "numpy.mean")
    (subtraction,) = named(dag, "operator.sub")
    assert flows(dag, mean.id, subtraction.id) and flows(dag, subtraction.id, division.id)


def test_a_number_a_name_holds_flows_into_the_statements_that_take_it() -> None:
    """``mean, std = x.mean(), x.std()`` then ``(x - mean) / std``; ``lo =
    np.percentile(x, 1)`` then ``np.clip(x, lo, hi)``: NumPy's scalars, held by names, are
    followed; a Python ``float`` of one is not, nor a number only an ``if`` reads."""

    def sample(img):
        x = img.astype(np.float32)
        mean, std = x.mean(), x.std()
        x = (x - mean) / std
        lo = np.percentile(x, 1)
        hi = np.percentile(x, 99)
        x = np.clip(x, lo, hi)
        peak = float(x.max())
        if x.min() < 0:
            x = x / peak
        return x

    dag, _ = trace(sample, IMG)
    (division, scaling) = named(dag, "operator.truediv")
    (mean,) = named(dag, "numpy.ndarray.mean")
    (std,) = named(dag, "numpy.ndarray.std")
    assert flows(dag, mean.id, division.id) and flows(dag, std.id, division.id)
    (clip,) = named(dag, "numpy.clip")
    assert all(flows(dag, p.id, clip.id) for p in named(dag, "numpy.percentile"))
    (maximum,) = named(dag, "numpy.ndarray.max")
    (minimum,) = named(dag, "numpy.ndarray.min")
    assert not flows(dag, maximum.id, scaling.id)
    assert not dag.successors(minimum.id, "produces") or not any(
        dag.successors(v, "uses") for v in dag.successors(minimum.id, "produces")
    )


def test_iterating_over_an_array_takes_each_item_from_it() -> None:
    """``for frame in video`` and ``[f(frame) for frame in video]`` make the items in C, as
    views of the memory the array views (here a reshape of a flat buffer, as ``np.load``'s
    array is of its file's): each is taken from the array by an ``operator.getitem`` step. A
    view of the same memory that is no item of it (a channel, ``video[..., 0]``'s) is not."""

    def looped(flat):
        video = flat.reshape(4, 12, 10, 3)
        frames = []
        for frame in video:
            frames.append(cv2.resize(frame, (8, 6)))
        return np.stack(frames)

    def comprehended(flat):
        video = flat.reshape(4, 12, 10, 3)
        return np.stack([cv2.resize(frame, (8, 6)) for frame in video])

    def channel(flat):
        video = flat.reshape(4, 12, 10, 3)
        planes = np.split(video[0], 3, axis=-1)  # views NumPy makes: no items of video
        return cv2.resize(np.ascontiguousarray(planes[0]), (8, 6))

    flat = np.arange(4 * 12 * 10 * 3, dtype=np.uint8)
    for sample in (looped, comprehended):
        dag, out = trace(sample, flat)
        resizes = named(dag, "cv2.resize")
        assert out.shape == (4, 6, 8, 3) and len(resizes) == 4
        assert len(named(dag, "operator.getitem")) == 4, [n.name for n in dag.calls()]
        (reshape,) = named(dag, "numpy.ndarray.reshape")
        assert all(flows(dag, reshape.id, r.id) for r in resizes), sample.__name__
        (stack,) = named(dag, "numpy.stack")
        assert all(flows(dag, r.id, stack.id) for r in resizes)
    dag, _ = trace(channel, flat)
    (item,) = named(dag, "operator.getitem")  # video[0]'s own: no step makes a plane from it
    assert item.args is not None and item.args[1]["value"] == 0


def test_unrecorded_calls_and_attribute_reads_are_steps() -> None:
    def sample(img):
        f = img.astype(np.float64)
        g = np.exp(-f / 255.0)
        return g.T

    dag, out = trace(sample, IMG)
    assert out.shape == (3, 80, 60)
    (exp,) = named(dag, "numpy.exp")  # a ufunc: no wrapper, named by the statement
    (transposed,) = named(dag, "numpy.ndarray.T")
    assert flows(dag, exp.id, transposed.id)


def test_line_level_off_records_calls_only() -> None:
    dag, _ = trace(rp.classify_sample, IMG, line_level=False)
    assert not [n for n in dag.calls() if n.name.startswith("operator.")]
    assert dag.metadata["tracer"]["line_level"] is False
    on, _ = trace(rp.classify_sample, IMG)
    assert on.metadata["tracer"]["line_level"] is True
    assert on.metadata["tracer"]["line_events"] >= 5


def test_a_statement_that_raises_makes_no_step() -> None:
    def sample(img):
        try:
            img = img / np.zeros((2, 2))  # shapes do not broadcast
        except ValueError:
            img = img.copy()  # a statement after the failed one
        return img

    dag, out = trace(sample, IMG)
    np.testing.assert_array_equal(out, IMG)
    assert not named(dag, "operator.truediv")
    assert named(dag, "numpy.ndarray.copy")


def test_step_names_are_never_functions_the_migrator_patches() -> None:
    from codedag.backends.registry import default_registry

    registry = default_registry()
    dags = [
        trace(fn, *args)[0] for fn, args in ((rp.classify_sample, (IMG,)), (rp.mosaic, ([IMG],)))
    ]
    names = {n.name for dag in dags for n in dag.calls() if n.name.startswith("operator.")}
    assert {"operator.truediv", "operator.setitem"} <= names
    assert not any(registry.is_migratable(name) for name in names)


def test_dag_with_steps_round_trips_through_json(tmp_path) -> None:
    dag, _ = trace(rp.mosaic, [IMG])
    dag.save(tmp_path / "dag.json")
    loaded = ExecutionDAG.load(tmp_path / "dag.json")
    assert loaded.to_dict() == dag.to_dict()
    assert all(s < d for s, d, _ in loaded.edges)  # ids stay a topological order


def test_a_step_is_timed_like_the_operation_it_stands_for() -> None:
    import time

    big = np.ones((1500, 1500), np.float64)

    def sample(x):
        y = cv2.GaussianBlur(x, (3, 3), 0)
        z = np.sqrt(y) * 2.0 + 1.0  # a few milliseconds of NumPy between recorded calls
        return cv2.GaussianBlur(z, (3, 3), 0)

    def alone(x):
        return np.sqrt(x) * 2.0 + 1.0

    # Both sides read this thread's CPU clock: time the machine spends on other work (a shared,
    # loaded machine) counts on neither side, so the ratio is the work's, not the load's.
    clock = time.thread_time_ns
    runs = []
    for _ in range(5):
        t0 = clock()
        alone(big)
        runs.append(clock() - t0)
    steps = []
    for _ in range(3):
        dag, _ = trace(sample, big, clock=clock)
        (step,) = named(dag, "operator.add")
        (root,) = [n for n in dag.calls() if n.depth == 0]
        blurs = named(dag, "cv2.GaussianBlur")
        assert step.total_ns + sum(b.total_ns for b in blurs) <= root.total_ns
        steps.append(step.total_ns)
    # the step's time is the statement's, not its frame's nor zero
    assert 0.25 * min(runs) <= min(steps) <= 4 * min(runs), (steps, runs)
