"""Calls rebuilt from the argument entries of the trace (``CallNode.args``).

:func:`rebuild_arguments` turns a call's entries (:mod:`codedag.trace.args`) back into
``(args, kwargs)``: arrays of the recorded shape, dtype and layout (with their recorded bytes
when they were small: warp matrices, kernels, LUTs), scalars, sequences, dtypes. Calibration
times backends on inputs rebuilt this way.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from codedag.errors import TraceError
from codedag.trace.args import Entry, library_function


def _numpy() -> Any:
    import numpy

    return numpy


def _synthetic(numpy: Any, shape: list[int], dtype: Any, seed: int) -> Any:
    """Deterministic data in the typical range of the dtype (images 0..255, floats 0..1)."""
    rng = numpy.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "ui":
        info = numpy.iinfo(dtype)
        return rng.integers(max(info.min, 0), min(info.max, 255), shape, endpoint=True).astype(
            dtype
        )
    if dtype.kind == "f":
        return rng.random(shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    return numpy.zeros(shape, dtype)


def _with_layout(numpy: Any, array: Any, layout: str) -> Any:
    if layout == "F":
        return numpy.asfortranarray(array)
    if layout == "strided" and array.ndim:
        # Every second element of a buffer twice as long along the last axis: same values, not
        # contiguous.
        wide = numpy.zeros((*array.shape[:-1], array.shape[-1] * 2), array.dtype)
        view = wide[..., ::2]
        view[...] = array
        return view
    return numpy.ascontiguousarray(array)


def rebuild_value(entry: Entry, seed: int = 0) -> Any:
    """One argument rebuilt from its entry (arrays synthesized unless their data was recorded).

    Raises:
        TraceError: the entry describes an object that cannot be rebuilt (its ``type`` says
            which), or is malformed.
    """
    kind = entry.get("kind")
    if kind == "scalar":
        if "float" in entry:
            return float(entry["float"])
        value = entry.get("value")
        if "dtype" in entry:
            return _numpy().dtype(entry["dtype"]).type(value)
        return value
    if kind == "sequence":
        items = [rebuild_value(item, seed + i + 1) for i, item in enumerate(entry["items"])]
        return tuple(items) if entry.get("type") == "tuple" else items
    if kind == "array":
        return _rebuild_array(entry, seed)
    if kind == "dtype":
        text = entry["value"]
        if text.startswith("torch."):
            import torch

            return getattr(torch, text[6:])
        if text in ("int", "float", "bool", "complex"):
            return {"int": int, "float": float, "bool": bool, "complex": complex}[text]
        return _numpy().dtype(text)
    if kind == "slice":
        return slice(entry.get("start"), entry.get("stop"), entry.get("step"))
    if kind == "ellipsis":
        return Ellipsis
    if kind == "function":
        function = library_function(entry.get("value", ""))
        if function is not None:
            return function
    if kind == "image":
        from PIL import Image

        width, height = entry["size"]
        mode = entry["mode"]
        bands = len(Image.new(mode, (1, 1)).getbands())
        numpy = _numpy()
        shape = [height, width] if bands == 1 else [height, width, bands]
        data = _synthetic(numpy, shape, numpy.dtype("uint8"), seed)
        if mode in ("L", "RGB", "RGBA", "CMYK", "YCbCr", "LAB", "HSV"):
            return Image.fromarray(data, mode)
        return Image.new(mode, (width, height))
    raise TraceError(
        f"argument {entry.get('name', '?')!r} was a {entry.get('type', kind)} ({kind}): it "
        "cannot be rebuilt from the DAG; pass it in `overrides`"
    )


def _rebuild_array(entry: Entry, seed: int) -> Any:
    numpy = _numpy()
    try:
        shape = [int(d) for d in entry["shape"]]
        dtype = numpy.dtype(entry["dtype"])
    except (KeyError, TypeError, ValueError) as error:
        raise TraceError(f"array entry {entry!r} has no usable shape/dtype: {error}") from error
    data = entry.get("data")
    if data is not None:
        raw = base64.b64decode(data)
        array = numpy.frombuffer(raw, dtype).reshape(shape).copy()
    else:
        array = _synthetic(numpy, shape, dtype, seed)
    array = _with_layout(numpy, array, entry.get("layout", "C"))
    if entry.get("type") == "torch.Tensor":
        import torch

        tensor = torch.from_numpy(numpy.ascontiguousarray(array))
        if entry.get("layout") == "strided" and tensor.ndim:
            wide = torch.zeros((*tensor.shape[:-1], tensor.shape[-1] * 2), dtype=tensor.dtype)
            wide[..., ::2] = tensor
            tensor = wide[..., ::2]
        elif entry.get("layout") == "F" and tensor.ndim > 1:
            tensor = tensor.permute(*reversed(range(tensor.ndim))).contiguous()
            tensor = tensor.permute(*reversed(range(tensor.ndim)))
        device = entry.get("device", "cpu")
        return tensor if device == "cpu" else tensor.to(_existing_device(device))
    return array


def _existing_device(device: object) -> str:
    """A recorded tensor's device, if this machine has it.

    Raises:
        TraceError: not a device name, or a device this machine lacks (``cuda:99``).
    """
    from codedag.devices.torch_devices import device_exists

    try:
        exists = isinstance(device, str) and device_exists(device)
    except (RuntimeError, ValueError):
        exists = False
    if not exists:
        raise TraceError(f"a tensor recorded on device {str(device)[:40]!r}, absent here")
    return str(device)


def rebuild_arguments(
    args: list[Entry] | None,
    seed: int = 0,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` that repeat a recorded call: ``fn(*args, **kwargs)``.

    Entries named ``"0"``, ``"1"``, ... become positional arguments in that order, the others
    keyword arguments. Arrays get the recorded shape, dtype and layout (``C``, ``F`` or a
    non-contiguous view) and their recorded bytes when those were kept (arrays up to 4096
    bytes), else deterministic data from ``seed`` in the dtype's usual range.

    Args:
        args: a call node's ``args`` (see docs/dag-format.md).
        seed: seed of the synthesized data.
        overrides: values for entries by name (``{"window": numpy.hanning}``), for arguments
            recorded only by their type.

    Raises:
        TraceError: ``args`` is None (not recorded) or an entry cannot be rebuilt and has no
            override.
    """
    if args is None:
        raise TraceError("this call has no recorded arguments (args is None)")
    overrides = overrides or {}
    positional: list[tuple[int, Any]] = []
    keywords: dict[str, Any] = {}
    for i, entry in enumerate(args):
        name = str(entry.get("name", i))
        value = overrides[name] if name in overrides else rebuild_value(entry, seed + 7919 * i)
        if name.isdigit():
            positional.append((int(name), value))
        else:
            keywords[name] = value
    positional.sort(key=lambda item: item[0])
    return tuple(v for _, v in positional), keywords


def rebuild_call(
    function: Callable[..., Any], args: list[Entry] | None, seed: int = 0, **overrides: Any
) -> Any:
    """Call ``function`` with the arguments rebuilt from ``args`` and return its result."""
    positional, keywords = rebuild_arguments(args, seed, overrides)
    return function(*positional, **keywords)
