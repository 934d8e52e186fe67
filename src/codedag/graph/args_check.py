"""Checks of ``CallNode.args`` read from a file: the tracer's argument descriptions.

Calibration rebuilds a traced call's inputs from these descriptions and runs the call, so a DAG
file that describes a 10^12-element array, a dtype that is no dtype, or an entry that is no object
must be refused when the DAG is loaded, naming the node and the field. The format is in
docs/dag-format.md. Unknown keys and unknown kinds are accepted as they are (they are rebuilt as
opaque objects, or refused by the rebuild with a clear error), so the format can grow.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_ARRAY_BYTES = 4 * 2**30  # one described array; a 4K float32 image batch of 64 is ~6 GB
MAX_DIMS = 32
MAX_SEQUENCE_ITEMS = 64
MAX_SEQUENCE_DEPTH = 4
MAX_DATA_BYTES = 4096  # arrays whose bytes are kept (warp matrices, kernels, LUTs)
_INT64 = (-(2**63), 2**63 - 1)

TORCH_ONLY_ITEMSIZE = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex32": 4}
PYTHON_DTYPES = ("int", "float", "bool", "complex")
LAYOUTS = ("C", "F", "strided")
ARRAY_TYPES = ("numpy.ndarray", "torch.Tensor")
IMAGE_MODES = frozenset(
    [
        "1",
        "L",
        "P",
        "RGB",
        "RGBA",
        "CMYK",
        "YCbCr",
        "LAB",
        "HSV",
        "I",
        "F",
        "LA",
        "PA",
        "RGBX",
        "RGBa",
        "La",
        "I;16",
        "I;16B",
        "I;16L",
    ]
)
NON_FINITE = ("nan", "inf", "-inf")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _device_ok(value: object) -> bool:
    if not isinstance(value, str):
        return False
    kind, _, index = value.partition(":")
    return kind in ("cpu", "cuda", "mps", "xpu", "meta") and (index == "" or index.isdigit())


def itemsize(value: object) -> int | None:
    """Bytes per element of a dtype name (NumPy's, or torch's without the prefix), else None."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    name = value.removeprefix("torch.")
    if name in TORCH_ONLY_ITEMSIZE:
        return TORCH_ONLY_ITEMSIZE[name]
    import numpy

    try:
        return int(numpy.dtype(name).itemsize)
    except (TypeError, ValueError):
        return None


def _dtype_ok(value: object) -> bool:
    return value in PYTHON_DTYPES or itemsize(value) is not None


def entry_problems(entry: object, where: str, depth: int = 0) -> list[str]:
    """What is wrong with one argument description (an empty list when nothing is)."""
    if not isinstance(entry, dict):
        return [f"{where}: expected an object, got {type(entry).__name__}"]
    problems: list[str] = []
    name = entry.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(f"{where}.name: expected a string")
    kind = entry.get("kind")
    if not isinstance(kind, str):
        return [*problems, f"{where}.kind: expected a string, got {kind!r:.40}"]
    check = _CHECKS.get(kind)
    if check is not None:
        check(entry, where, depth, problems)
    return problems


def _array(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    shape, dtype = entry.get("shape"), entry.get("dtype")
    if entry.get("type", "numpy.ndarray") not in ARRAY_TYPES:
        problems.append(f"{where}.type: expected one of {ARRAY_TYPES}")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(_is_int(d) and d >= 0 for d in shape)
    ):
        problems.append(f"{where}.shape: expected up to {MAX_DIMS} sizes >= 0, got {shape!r:.60}")
        return
    size = itemsize(dtype)
    if size is None:
        problems.append(f"{where}.dtype: {dtype!r:.40} is not a dtype")
        return
    nbytes = math.prod(shape) * size
    if nbytes > MAX_ARRAY_BYTES:
        problems.append(
            f"{where}: an array of {nbytes} bytes (more than {MAX_ARRAY_BYTES}) cannot be rebuilt"
        )
    if entry.get("layout", "C") not in LAYOUTS:
        problems.append(f"{where}.layout: expected one of {LAYOUTS}")
    if "device" in entry and not _device_ok(entry["device"]):
        problems.append(f"{where}.device: {entry['device']!r:.40} is not a device")
    data = entry.get("data")
    if data is not None:
        expected = 4 * ((nbytes + 2) // 3)  # base64 length of nbytes
        if not isinstance(data, str) or nbytes > MAX_DATA_BYTES or len(data) != expected:
            problems.append(f"{where}.data: expected the base64 of the {nbytes} array bytes")


def _scalar(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    if "float" in entry:
        if entry["float"] not in NON_FINITE:
            problems.append(f"{where}.float: expected one of {NON_FINITE}")
        return
    value = entry.get("value")
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{where}.value: non-finite floats are written as 'float'")
    elif not (value is None or isinstance(value, bool | int | float | str)):
        problems.append(f"{where}.value: expected a number, string, boolean or null")
    if "dtype" in entry and not _dtype_ok(entry["dtype"]):
        problems.append(f"{where}.dtype: {entry['dtype']!r:.40} is not a dtype")


def _sequence(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    items = entry.get("items")
    if entry.get("type") not in ("tuple", "list"):
        problems.append(f"{where}.type: expected 'tuple' or 'list'")
    if not isinstance(items, list) or len(items) > MAX_SEQUENCE_ITEMS:
        problems.append(f"{where}.items: expected a list of at most {MAX_SEQUENCE_ITEMS} entries")
        return
    if depth >= MAX_SEQUENCE_DEPTH:
        problems.append(f"{where}: sequences nested deeper than {MAX_SEQUENCE_DEPTH}")
        return
    for i, item in enumerate(items):
        problems.extend(entry_problems(item, f"{where}.items[{i}]", depth + 1))


def _image(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    size = entry.get("size")
    if entry.get("mode") not in _image_modes():
        problems.append(f"{where}.mode: {entry.get('mode')!r:.40} is not a PIL image mode")
    if not (isinstance(size, list) and len(size) == 2 and all(_is_int(s) and s >= 0 for s in size)):
        problems.append(f"{where}.size: expected [width, height]")
    elif 4 * size[0] * size[1] > MAX_ARRAY_BYTES:
        problems.append(f"{where}.size: an image of {size[0]}x{size[1]} cannot be rebuilt")


def _image_modes() -> frozenset[str]:
    from PIL import Image

    return IMAGE_MODES | frozenset(getattr(Image, "MODES", ()))


def _dtype(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    if not _dtype_ok(entry.get("value")):
        problems.append(f"{where}.value: {entry.get('value')!r:.40} is not a dtype")


def _slice(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    for key in ("start", "stop", "step"):
        value = entry.get(key)
        if value is not None and not (_is_int(value) and _INT64[0] <= value <= _INT64[1]):
            problems.append(f"{where}.{key}: expected a whole number or null")


def _function(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    value = entry.get("value")
    if not isinstance(value, str) or len(value) > 200 or not _DOTTED.fullmatch(value):
        problems.append(f"{where}.value: expected a function's dotted name, got {value!r:.60}")


def _object(entry: dict[str, Any], where: str, depth: int, problems: list[str]) -> None:
    if not isinstance(entry.get("type"), str):
        problems.append(f"{where}.type: expected a type name")


_CHECKS = {
    "array": _array,
    "scalar": _scalar,
    "sequence": _sequence,
    "image": _image,
    "dtype": _dtype,
    "slice": _slice,
    "function": _function,
    "object": _object,
}


def args_problems(args: list[Any], where: str) -> list[str]:
    """The problems of a call's ``args`` list (``where`` names the node in messages)."""
    problems: list[str] = []
    for i, entry in enumerate(args):
        problems.extend(entry_problems(entry, f"{where} args[{i}]"))
    return problems
