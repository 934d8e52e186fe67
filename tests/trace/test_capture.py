"""Argument capture: scalars as they are, data values as value nodes (small arrays with their
bytes for library calls), containers one level down, anything else by its type."""

from __future__ import annotations

import numpy as np

from codedag.trace.capture import ArgumentCapture
from codedag.trace.identity import ValueTracker
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    MAX_ITEMS,
    Sequence,
)
from codedag.trace.value_nodes import DataTypes


def capture() -> ArgumentCapture:
    return ArgumentCapture(ValueTracker([], Sequence(), DataTypes()))


class Opaque:
    pass


def test_user_arguments_keep_scalars_and_types_and_use_data_values() -> None:
    cap = capture()
    image = np.zeros((4, 4), np.uint8)
    out: list = []
    found: list[int] = []
    cap.user_arg("k", 3, out, found)
    cap.user_arg("img", image, out, found)
    cap.user_arg("thing", Opaque(), out, found)
    assert out[0] == ("k", ARG_SCALAR, 3)
    assert out[1][:2] == ("img", ARG_VALUE)
    assert out[2] == ("thing", ARG_TYPE, Opaque)
    assert found == [out[1][2]]  # the call uses the image's value node
    assert cap.tracker.lookup(image)[1] == out[1][2]


def test_a_user_container_is_described_by_length_and_its_data_values_are_used() -> None:
    cap = capture()
    a, b = np.zeros(3), np.ones(3)
    out: list = []
    found: list[int] = []
    cap.user_arg("batch", [a, 1, b], out, found)
    assert out == [("batch", ARG_CONTAINER, ("list", 3, None))]
    assert found == [cap.tracker.lookup(a)[1], cap.tracker.lookup(b)[1]]


def test_a_small_array_of_a_library_call_keeps_its_bytes_a_large_one_does_not() -> None:
    cap = capture()
    small = np.arange(6, dtype=np.uint8).reshape(2, 3)
    large = np.zeros(10_000, np.uint8)
    out: list = []
    found: list[int] = []
    cap.library_arg(0, small, out, found)
    cap.library_arg(1, large, out, found)
    label, kind, (vseq, data) = out[0]
    assert (label, kind) == (0, ARG_SMALL)
    assert data == small.tobytes()
    assert out[1][:2] == (1, ARG_VALUE)
    assert found == [vseq, out[1][2]]


def test_library_containers_carry_their_items_up_to_the_limits() -> None:
    cap = capture()
    out: list = []
    found: list[int] = []
    cap.library_arg("ksize", (3, 5), out, found)
    cap.library_arg("opts", {"dtype": np.dtype("float32"), "mode": "edge"}, out, found)
    cap.library_arg("long", list(range(MAX_ITEMS + 1)), out, found)
    cap.library_arg("obj", Opaque(), out, found)
    assert out[0] == ("ksize", ARG_CONTAINER, ("tuple", 2, [(ARG_SCALAR, 3), (ARG_SCALAR, 5)]))
    assert out[1] == (
        "opts",
        ARG_CONTAINER,
        ("dict", 2, [("dtype", ARG_OBJ, np.dtype("float32")), ("mode", ARG_SCALAR, "edge")]),
    )
    assert out[2] == ("long", ARG_CONTAINER, ("list", MAX_ITEMS + 1, None))
    assert out[3] == ("obj", ARG_TYPE, Opaque)
    assert found == []


def test_nesting_is_cut_at_the_limit_but_data_values_inside_are_still_used() -> None:
    cap = capture()
    deep = np.zeros(2)
    out: list = []
    found: list[int] = []
    cap.library_arg("nested", [[[deep]]], out, found)
    _, kind, (name, n, items) = out[0]
    assert (kind, name, n) == (ARG_CONTAINER, "list", 1)
    inner = items[0]
    assert inner[0] == ARG_CONTAINER and inner[1][2][0] == (ARG_CONTAINER, ("list", 1, None))
    assert found == [cap.tracker.lookup(deep)[1]]


def test_the_receiver_of_a_method_is_a_used_value() -> None:
    cap = capture()
    image = np.zeros((2, 2))
    out: list = []
    found: list[int] = []
    cap.receiver(image, out, found)
    assert out == [("self", ARG_VALUE, found[0])]


def test_an_image_argument_is_never_asked_for_its_pixels(tmp_path) -> None:
    # a PIL image's __array_interface__ is a property that decodes the file and copies every
    # pixel: the tracer asking a recorded call's argument for it made the decode its own work,
    # subtracted from the call that decodes (ImageOps.exif_transpose's copy), so the planner
    # saw a JPEG decode as free
    from PIL import Image, ImageOps
    from torch.utils.data import DataLoader, Dataset

    from codedag.trace.tracer import trace_dataloader

    paths = []
    for i in range(4):
        path = tmp_path / f"{i}.jpg"
        Image.fromarray(np.full((96, 128, 3), 40 * i, np.uint8)).save(path)
        paths.append(path)

    class Files(Dataset):
        def __len__(self) -> int:
            return len(paths)

        def __getitem__(self, i: int) -> np.ndarray:
            im = ImageOps.exif_transpose(Image.open(paths[i]))
            return np.asarray(im.convert("L").resize((8, 8))).copy()

    pixels: list[tuple[int, int]] = []
    original = Image.Image.tobytes

    def tobytes(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        pixels.append(self.size)
        return original(self, *args, **kwargs)

    Image.Image.tobytes = tobytes  # type: ignore[method-assign]
    try:
        tracer, _ = trace_dataloader(DataLoader(Files(), batch_size=2))
    finally:
        Image.Image.tobytes = original  # type: ignore[method-assign]
    assert pixels and set(pixels) == {(8, 8)}  # the samples' own np.asarray, nothing else
    assert any(n.name == "PIL.ImageOps.exif_transpose" for n in tracer.dag.calls())
