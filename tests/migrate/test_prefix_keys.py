"""The identity of a file source: the file a path names now, never a remembered one; an index's
slices and a library's classes and plain objects keyed by their values."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from codedag.migrate.cache.keys import Unkeyable, encode_argument, source_identity


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_the_same_file_keeps_its_identity(tmp_path: Path) -> None:
    image = tmp_path / "a.jpg"
    _write(image, b"jpeg")
    assert source_identity(str(image)) == source_identity(str(image))
    assert source_identity(image) == source_identity(str(image))


def test_an_edited_or_replaced_file_is_another_source(tmp_path: Path) -> None:
    image = tmp_path / "a.jpg"
    _write(image, b"jpeg")
    first = source_identity(str(image))
    _write(image, b"jpeg, longer")
    edited = source_identity(str(image))
    assert edited != first
    other = tmp_path / "b.jpg"
    _write(other, b"jpeg, longer")
    os.replace(other, image)  # a new inode under the same name
    assert source_identity(str(image)) not in (first, edited)


def test_a_link_pointed_elsewhere_names_the_new_file(tmp_path: Path) -> None:
    one, two = tmp_path / "one.jpg", tmp_path / "two.jpg"
    _write(one, b"same size")
    _write(two, b"same size")
    os.utime(one, ns=(10**18, 10**18))
    os.utime(two, ns=(10**18, 10**18))
    link = tmp_path / "current.jpg"
    link.symlink_to(one)
    through_link = source_identity(str(link))  # the link's real path is remembered here
    assert through_link == source_identity(str(one))
    link.unlink()
    link.symlink_to(two)
    assert source_identity(str(link)) != through_link


def test_a_missing_file_has_no_identity(tmp_path: Path) -> None:
    with pytest.raises(Unkeyable, match="cannot stat"):
        source_identity(str(tmp_path / "gone.jpg"))


def test_a_file_this_process_may_not_read_has_no_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "a.jpg"
    _write(image, b"jpeg")
    readable = source_identity(str(image))
    os.chmod(image, 0)  # its size, times and inode are as they were
    # as a user other than root reads it (root may read any file)
    monkeypatch.setattr(os, "access", lambda path, mode: bool(os.stat(path).st_mode & 0o444))
    with pytest.raises(Unkeyable, match="cannot read"):
        source_identity(str(image))
    os.chmod(image, 0o600)
    assert source_identity(str(image)) == readable


def test_a_file_in_a_linked_folder_is_named_by_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "images"
    real.mkdir()
    _write(real / "a.jpg", b"jpeg")
    (tmp_path / "linked").symlink_to(real)
    assert source_identity(str(tmp_path / "linked" / "a.jpg")) == source_identity(
        str(real / "a.jpg")
    )


def _encoded(value: object) -> bytes:
    out: list[bytes] = []
    encode_argument(value, out)
    return b"".join(out)


def test_an_array_is_keyed_by_its_values_and_its_layout() -> None:
    """The same values laid out otherwise compute values laid out otherwise (a ufunc keeps its
    input's layout), and the store reads a value back as it was laid out."""
    hwc = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    view = hwc.transpose(2, 0, 1)
    assert _encoded(view) == _encoded(view.copy(order="K"))  # the same values and layout
    assert _encoded(view) != _encoded(np.ascontiguousarray(view))
    assert _encoded(view) != _encoded(view[:, ::-1])
    assert _encoded(hwc) == _encoded(hwc.copy())


def test_an_index_is_keyed_by_its_slices() -> None:
    assert _encoded((slice(None), slice(None), slice(None, None, -1))) == _encoded(
        (slice(None), slice(None), slice(None, None, -1))
    )
    assert _encoded(slice(0, 8)) != _encoded(slice(0, 9)) != _encoded(slice(0, 8, 2))
    assert _encoded((Ellipsis, 0)) != _encoded((slice(None), 0))
    with pytest.raises(Unkeyable):
        _encoded(slice(object()))


def test_a_librarys_classes_and_plain_objects_are_keyed_by_what_they_compute_with() -> None:
    import functools

    import cv2
    from PIL import ImageFilter

    assert _encoded(ImageFilter.SMOOTH) == _encoded(ImageFilter.SMOOTH)
    assert _encoded(ImageFilter.SMOOTH) != _encoded(ImageFilter.SHARPEN)
    blur = _encoded(ImageFilter.GaussianBlur(2))
    assert blur == _encoded(ImageFilter.GaussianBlur(2))
    assert blur != _encoded(ImageFilter.GaussianBlur(3))
    assert blur != _encoded(ImageFilter.BoxBlur(2))  # the same attributes, another class
    # functions (Python's own objects), C objects, callables and plain user objects: no value
    for unkeyable in (
        lambda v: v,
        functools.partial(abs),
        cv2.createCLAHE(),
        np.random.default_rng(0),
        torch.nn.ReLU(),
        Path("."),
        type("Mine", (), {}),
    ):
        with pytest.raises(Unkeyable):
            _encoded(unkeyable)


def test_an_in_memory_stream_is_identified_by_its_bytes_and_position() -> None:
    import io

    data = b"\x89PNG" + bytes(range(200))
    first = source_identity(io.BytesIO(data))
    assert source_identity(io.BytesIO(bytes(data))) == first  # another object, the same bytes
    moved = io.BytesIO(data)
    moved.seek(4)
    assert source_identity(moved) != first
    assert source_identity(io.BytesIO(data[:-1] + b"\x00")) != first
    stream = io.BytesIO(data)
    source_identity(stream)
    stream.write(b"more")  # the digest's view of its buffer was released: it may grow


def test_the_methods_prefix_values_record_are_named_as_the_tracer_names_them() -> None:
    import numpy as np
    import torch
    from PIL import Image

    from codedag.backends.names import canonical_name
    from codedag.migrate.cache.headers import METHOD_NAMES

    owners = {"ndarray": np.ndarray, "pil": Image.Image, "tensor": torch.Tensor}
    for (kind, method), step in METHOD_NAMES.items():
        assert canonical_name(getattr(owners[kind], method)) == step, (kind, method)


def test_an_array_mapped_read_only_is_keyed_by_its_file_and_place_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``np.load(path, mmap_mode="r")`` held by a data set and indexed per sample: hashing the
    whole mapping at every index would cost more than the sample."""
    import codedag.migrate.cache.keys as keys

    path = tmp_path / "train.npy"
    np.save(path, np.arange(6 * 4 * 5, dtype=np.uint16).reshape(6, 4, 5))
    mapped = np.load(path, mmap_mode="r")

    def hashed(array: np.ndarray) -> bytes:
        raise AssertionError("a read-only mapped array's bytes were hashed")

    monkeypatch.setattr(keys, "_array_identity", hashed)
    whole = source_identity(mapped)
    assert whole.startswith(b"mapped:") and whole == source_identity(np.load(path, mmap_mode="r"))
    assert source_identity(mapped[2]) == source_identity(mapped[1:][1])  # one row, two views
    assert len({source_identity(mapped[i]) for i in range(6)}) == 6
    assert source_identity(mapped[:, 1]) != source_identity(mapped[1])  # strides differ
    np.save(path, np.zeros((6, 4, 5), np.uint16))  # the file rewritten: another source
    assert source_identity(np.load(path, mmap_mode="r")) != whole
    monkeypatch.undo()
    for mode in ("c", "r+"):  # writable in this process: its bytes may differ from the file's
        assert source_identity(np.load(path, mmap_mode=mode)).startswith(b"array:")


def test_a_librarys_function_given_as_an_argument_is_keyed_by_its_name() -> None:
    """``librosa.power_to_db(m, ref=np.max)``: the reference is a NumPy function, the same in
    every process of those versions; a lambda or a user's function may hold anything."""

    def encoded(value: object) -> bytes:
        out: list[bytes] = []
        encode_argument(value, out)
        return b"".join(out)

    assert encoded(np.max) == b"function:numpy.max;"
    assert encoded(np.median) != encoded(np.max)
    assert encoded(np.add) == b"function:numpy.add;"  # a ufunc
    assert encoded(np.linalg.norm) == b"function:numpy.linalg.norm;"
    assert encoded(max) == b"function:builtins.max;"

    def mine(x: np.ndarray) -> np.ndarray:
        return x

    for value in (lambda x: x, mine, np.zeros(2).max):  # a bound method too
        with pytest.raises(Unkeyable):
            encoded(value)
