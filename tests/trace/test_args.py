"""CallNode.args: argument descriptions of library calls, rebuilt into equal calls."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from codedag.errors import TraceError
from codedag.graph import ExecutionDAG
from codedag.trace import EnhancedTracer
from codedag.trace.args import layout_of
from codedag.trace.rebuild import rebuild_arguments, rebuild_value

librosa = pytest.importorskip("librosa")

RNG = np.random.default_rng(0)
IMG = RNG.integers(0, 255, (40, 60, 3), dtype=np.uint8)
WARP = np.float32([[0.9, 0.1, 3.5], [-0.2, 1.1, -2.0]])
LUT = (255 - np.arange(256)).astype(np.uint8)
AUDIO = RNG.standard_normal(4000).astype(np.float32)


def pipeline() -> dict[str, np.ndarray]:
    return {
        "cv2.warpAffine": cv2.warpAffine(IMG, WARP, (30, 20), borderValue=(114, 114, 114)),
        "cv2.resize": cv2.resize(IMG, (16, 8), interpolation=cv2.INTER_AREA),
        "cv2.LUT": cv2.LUT(IMG, LUT),
        "librosa.feature.spectral.melspectrogram": librosa.feature.melspectrogram(
            y=AUDIO, sr=16000, n_mels=64
        ),
    }


FUNCTIONS = {
    "cv2.warpAffine": cv2.warpAffine,
    "cv2.resize": cv2.resize,
    "cv2.LUT": cv2.LUT,
    "librosa.feature.spectral.melspectrogram": librosa.feature.melspectrogram,
}
BIG = {"cv2.warpAffine": "0", "cv2.resize": "0", "cv2.LUT": "0"}


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[ExecutionDAG, ExecutionDAG, dict[str, np.ndarray]]:
    pipeline()  # warm: librosa's first call compiles and caches
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        outputs = pipeline()
    path = tracer.save(tmp_path_factory.mktemp("args") / "dag.json")
    return tracer.dag, ExecutionDAG.load(path), outputs


def node(dag: ExecutionDAG, name: str):
    (found,) = [n for n in dag.calls() if n.name == name and n.depth == 1]
    return found


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_recorded_arguments_rebuild_the_exact_call(traced, name) -> None:
    dag, loaded, outputs = traced
    for graph in (dag, loaded):  # also after a round trip through dag.json
        call = node(graph, name)
        overrides = {BIG[name]: IMG} if name in BIG else {"y": AUDIO}
        args, kwargs = rebuild_arguments(call.args, overrides=overrides)
        np.testing.assert_array_equal(FUNCTIONS[name](*args, **kwargs), outputs[name])


def test_entries_follow_the_documented_format(traced) -> None:
    dag, _, _ = traced
    warp = node(dag, "cv2.warpAffine").args
    assert [e["name"] for e in warp] == ["0", "1", "2", "borderValue"]
    image, matrix, dsize, border = warp
    assert image == {
        "name": "0",
        "kind": "array",
        "type": "numpy.ndarray",
        "shape": [40, 60, 3],
        "dtype": "uint8",
        "layout": "C",
    }  # 7200 bytes: no data
    assert matrix["shape"] == [2, 3] and "data" in matrix
    np.testing.assert_array_equal(rebuild_value(matrix), WARP)
    assert dsize == {
        "name": "2",
        "kind": "sequence",
        "type": "tuple",
        "items": [{"kind": "scalar", "value": 30}, {"kind": "scalar", "value": 20}],
    }
    assert rebuild_value(border) == (114, 114, 114)
    resize = node(dag, "cv2.resize").args
    assert resize[2] == {"name": "interpolation", "kind": "scalar", "value": cv2.INTER_AREA}
    lut = node(dag, "cv2.LUT").args[1]
    assert lut["dtype"] == "uint8" and len(lut["data"]) == 344  # base64 of 256 bytes
    mel = {e["name"]: e for e in node(dag, "librosa.feature.spectral.melspectrogram").args}
    assert mel["sr"]["value"] == 16000 and mel["n_mels"]["value"] == 64  # **kwargs expanded
    assert mel["y"]["shape"] == [4000] and "data" not in mel["y"]
    assert "kwargs" not in mel
    json.dumps(dag.to_dict(), allow_nan=False)


def test_user_calls_and_unwrapped_c_methods_have_no_args(traced) -> None:
    dag, _, _ = traced
    root = next(n for n in dag.calls() if n.depth == 0)
    assert root.args is None


def test_scalars_dtypes_slices_and_layouts_round_trip() -> None:
    def run() -> None:
        arr = np.arange(24, dtype=np.float32).reshape(4, 6)
        np.clip(arr, np.float32(1.5), float("inf"))
        np.asarray(arr.T, dtype=np.float64)
        np.take(arr[:, ::2], [0, 2], axis=1)
        np.full((2, 3), float("nan"))

    tracer = EnhancedTracer()
    with tracer.tracing_context():
        run()
    calls = {n.name: {e["name"]: e for e in n.args} for n in tracer.dag.calls() if n.args}
    # Python-implemented NumPy functions: named parameters, sentinel defaults left out
    clip = calls["numpy.clip"]
    assert clip["a_min"] == {"name": "a_min", "kind": "scalar", "value": 1.5, "dtype": "float32"}
    assert clip["a_max"] == {"name": "a_max", "kind": "scalar", "float": "inf"}
    assert "min" not in clip and "max" not in clip  # left at numpy's _NoValue
    # C functions (wrapped): positions and keywords as called
    assert calls["numpy.asarray"]["0"]["layout"] == "F"
    assert calls["numpy.asarray"]["dtype"] == {"name": "dtype", "kind": "dtype", "value": "float64"}
    take = calls["numpy.take"]
    assert take["a"]["layout"] == "strided" and take["a"]["shape"] == [4, 3]
    assert calls["numpy.full"]["fill_value"] == {
        "name": "fill_value",
        "kind": "scalar",
        "float": "nan",
    }
    args, kwargs = rebuild_arguments(list(take.values()))
    assert args == () and not kwargs["a"].flags.c_contiguous and kwargs["a"].shape == (4, 3)
    np.testing.assert_array_equal(
        kwargs["a"], np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    )
    assert kwargs["axis"] == 1 and kwargs["indices"] == [0, 2]
    a_min = rebuild_value(clip["a_min"])
    assert type(a_min) is np.float32 and a_min == 1.5
    assert np.isnan(rebuild_value(calls["numpy.full"]["fill_value"]))
    assert rebuild_value({"kind": "slice", "start": 1, "stop": None, "step": 2}) == slice(
        1, None, 2
    )
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(
        np.clip(**rebuild_arguments(list(clip.values()), overrides={"a": arr})[1]),
        np.clip(arr, np.float32(1.5), float("inf")),
    )


def test_synthesized_arrays_have_the_recorded_shape_dtype_and_layout() -> None:
    entry = {"kind": "array", "type": "numpy.ndarray", "shape": [5, 7], "dtype": "float32"}
    for layout, check in (
        ("C", lambda a: a.flags.c_contiguous),
        ("F", lambda a: a.flags.f_contiguous and not a.flags.c_contiguous),
        ("strided", lambda a: not a.flags.c_contiguous and not a.flags.f_contiguous),
    ):
        array = rebuild_value({**entry, "layout": layout}, seed=3)
        assert array.shape == (5, 7) and array.dtype == np.float32 and check(array)
        assert array.min() >= 0 and array.max() <= 1
    image = rebuild_value({**entry, "dtype": "uint8", "layout": "C"})
    assert image.dtype == np.uint8 and image.max() > 1
    same = rebuild_value({**entry, "layout": "C"}, seed=3)
    np.testing.assert_array_equal(same, rebuild_value({**entry, "layout": "C"}, seed=3))
    assert layout_of([4, 1, 3], [12, 99, 4], 4) == "C"  # size-1 axes have any stride


def test_tensors_and_images_are_rebuilt() -> None:
    import torch
    from PIL import Image

    tensor = rebuild_value(
        {"kind": "array", "type": "torch.Tensor", "shape": [2, 3], "dtype": "float16"}
    )
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float16
    strided = rebuild_value(
        {
            "kind": "array",
            "type": "torch.Tensor",
            "shape": [2, 3],
            "dtype": "int64",
            "layout": "strided",
        }
    )
    assert strided.shape == (2, 3) and not strided.is_contiguous()
    image = rebuild_value(
        {"kind": "image", "type": "PIL.Image.Image", "mode": "RGB", "size": [7, 5]}
    )
    assert isinstance(image, Image.Image) and image.size == (7, 5) and image.mode == "RGB"


def test_unrebuildable_arguments_need_an_override() -> None:
    entries = [
        {"name": "0", "kind": "scalar", "value": 3},
        {"name": "window", "kind": "object", "type": "builtins.function"},
    ]
    with pytest.raises(TraceError, match=r"'window' was a builtins\.function"):
        rebuild_arguments(entries)
    args, kwargs = rebuild_arguments(entries, overrides={"window": np.hanning})
    assert args == (3,) and kwargs == {"window": np.hanning}
    with pytest.raises(TraceError, match="no recorded arguments"):
        rebuild_arguments(None)


def test_python_library_frames_name_positional_only_and_star_args() -> None:
    from codedag.trace.args import describe_arguments
    from codedag.trace.records import ARG_CONTAINER, ARG_SCALAR

    # def f(a, /, b, *rest, c, **extra) called as f(1, 2, 3, 4, c=5, d=6)
    raw = [
        ("a", ARG_SCALAR, 1),
        ("b", ARG_SCALAR, 2),
        ("c", ARG_SCALAR, 5),
        ("rest", ARG_CONTAINER, ("tuple", 2, [(ARG_SCALAR, 3), (ARG_SCALAR, 4)])),
        ("extra", ARG_CONTAINER, ("dict", 1, [("d", ARG_SCALAR, 6)])),
    ]
    entries = describe_arguments(raw, {}, (1, 2, 1, True, True))
    assert [e["name"] for e in entries] == ["0", "1", "2", "3", "c", "d"]
    assert rebuild_arguments(entries) == ((1, 2, 3, 4), {"c": 5, "d": 6})
    # without *args items only the positional-only parameter goes by position
    raw[3] = ("rest", ARG_CONTAINER, ("tuple", 0, []))
    entries = describe_arguments(raw, {}, (1, 2, 1, True, True))
    assert rebuild_arguments(entries) == ((1,), {"b": 2, "c": 5, "d": 6})


def test_views_count_the_bytes_they_reference() -> None:
    from numpy.lib.stride_tricks import as_strided

    signal = np.zeros(100_000, np.float32)
    frames = as_strided(signal, shape=(97_953, 2048), strides=(4, 4))  # 784 MB apparent
    column = np.zeros((1000, 1000), np.uint8)[:, 3]
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        np.shape(frames)
        np.shape(column)
    sizes = [v.nbytes for v in tracer.dag.values()]
    assert sizes[0] == (97_952 + 2047) * 4 + 4  # the span of the signal the frames cover
    assert sizes[1] == 1000  # apparent size of a column view: what it references is 999 * 1000 + 1


def test_a_library_function_passed_as_an_argument_is_recorded_by_name_and_rebuilt() -> None:
    spectrum = np.abs(librosa.stft(AUDIO, n_fft=256)) ** 2
    librosa.power_to_db(spectrum, ref=np.max)  # warm
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        expected = librosa.power_to_db(spectrum, ref=np.max)
        np.apply_along_axis(lambda row: row * 2, 0, IMG[:, :, 0])
    (db,) = [n for n in tracer.dag.calls() if n.name.endswith("power_to_db")]
    ref = {e["name"]: e for e in db.args}["ref"]
    assert ref == {"name": "ref", "kind": "function", "value": "numpy.max"}
    args, kwargs = rebuild_arguments(db.args, overrides={"S": spectrum})
    assert kwargs["ref"] is np.max
    np.testing.assert_array_equal(librosa.power_to_db(*args, **kwargs), expected)
    (along,) = [n for n in tracer.dag.calls() if n.name.endswith("apply_along_axis")]
    assert along.args[0]["kind"] == "object"  # a lambda is no library's function


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (np.max, "numpy.max"),
        (np.maximum, "numpy.maximum"),  # a ufunc
        (librosa.util.normalize, "librosa.util.utils.normalize"),
        (cv2.resize, None),  # a C function that names no module
        (lambda x: x, None),
        (__import__("random").Random(0).random, None),  # a bound method: another object
        (np.float32, None),  # a type is a dtype, not a function
        (len, None),  # not a library codedag knows
    ],
)
def test_library_functions_are_those_their_name_finds_again(value: object, found: object) -> None:
    from codedag.trace.args import library_function, library_function_name

    assert library_function_name(value) == found
    if found is not None:
        assert library_function(str(found)) is value


@pytest.mark.parametrize(
    "name", ["os.system", "numpy", "numpy.__class__", "numpy..max", "numpy.max()", "numpy.float32"]
)
def test_a_function_name_from_a_file_reaches_only_a_library_function(name: str) -> None:
    from codedag.graph.args_check import entry_problems
    from codedag.trace.args import library_function

    assert library_function(name) is None
    with pytest.raises(TraceError, match="cannot be rebuilt"):
        rebuild_value({"name": "ref", "kind": "function", "value": name})
    bad = entry_problems({"kind": "function", "value": "numpy.max()"}, "args[0]")
    assert bad and "dotted name" in bad[0]
    assert entry_problems({"kind": "function", "value": "numpy.max"}, "args[0]") == []
