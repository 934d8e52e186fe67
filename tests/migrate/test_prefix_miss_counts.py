"""What a miss sample costs the loading thread, counted: a cold epoch's chain computes each value's
header once and reads nothing; a call's key is the same bytes whichever way its arguments are
encoded."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prefix_support import PlainFiles, epoch, equal, runtime, write_images

import codedag.migrate.cache.keys as keys
import codedag.migrate.cache.prefix_values as prefix_values
import codedag.migrate.cache.session as session_module
from codedag.migrate.cache.prefix_values import Lineage, PrefixValue
from codedag.store.meta import meta_of

FUNCTIONS = (
    "cv2.imread",
    "cv2.resize",
    "cv2.cvtColor",
    "cv2.GaussianBlur",
    "numpy.ascontiguousarray",
)


def test_a_cold_epoch_computes_each_header_once_and_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 5
    dataset = PlainFiles(write_images(tmp_path / "images", n=n))
    reference = epoch(dataset)
    headers: Counter[str] = Counter()
    for module in (prefix_values, session_module):

        def counted(value: Any, _module: str = module.__name__) -> Any:
            headers[_module] += 1
            return meta_of(value)

        monkeypatch.setattr(module, "meta_of", counted)
    rt = runtime(tmp_path / "cache")
    caller = f"{PlainFiles.__module__}.PlainFiles.__getitem__"
    rt.chains[0] = dataclasses.replace(
        rt.chains[0], callers=(caller,), functions=FUNCTIONS, cut_function=FUNCTIONS[-1]
    )
    rt._sources = {"cv2.imread": rt.chains}
    reads: Counter[str] = Counter()
    for name in ("meta", "get"):
        original = getattr(rt.store, name)

        def read(*args: Any, _name: str = name, _f: Any = original) -> Any:
            reads[_name] += 1
            return _f(*args)

        monkeypatch.setattr(rt.store, name, read)
    rt.apply()
    try:
        assert equal(epoch(dataset), reference)
    finally:
        rt.restore()
    assert rt.stats()["misses"] == {"new": n}
    # the source's and three calls' headers (stored for later epochs), each computed once
    assert headers == {session_module.__name__: n, prefix_values.__name__: 3 * n}
    assert not reads


def test_a_calls_key_encodes_its_arguments_as_encode_argument_does() -> None:
    lineage = Lineage(session_module.ChainSpec("c", "f", "0", (), (), "cut", 0), None)
    value = PrefixValue(lineage, b"k" * 16, meta_of(np.zeros(2)), np.zeros(2))
    args: tuple[Any, ...] = (value, (24, 24), 0.5, "RGB", None, [1, True], np.uint8)
    kwargs = {"interpolation": 3, "flag": False}
    expected = [b"cv2.resize(", b"<" + value._key + b">"]
    for argument in args[1:]:
        keys.encode_argument(argument, expected)
    for keyword in sorted(kwargs):
        expected.append(keyword.encode() + b"=")
        keys.encode_argument(kwargs[keyword], expected)
    assert prefix_values._key_parts("cv2.resize", args, kwargs) == expected
    nested = prefix_values._key_parts("numpy.stack", ([value, 1],), {})
    assert nested == [b"numpy.stack(", b"list[2](", b"<" + value._key + b">", b"int:1;", b")"]
