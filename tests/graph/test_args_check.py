"""Argument descriptions read from a DAG file: what the tracer writes passes, the rest is named."""

from __future__ import annotations

import base64

import cv2
import numpy as np
import pytest

from codedag.graph.args_check import args_problems, entry_problems
from codedag.trace.tracer import EnhancedTracer


def pipeline() -> np.ndarray:
    image = np.zeros((20, 30, 3), np.uint8)
    image = cv2.resize(image, (16, 8), interpolation=cv2.INTER_AREA)
    matrix = np.float32([[1, 0, 2], [0, 1, 3]])
    image = cv2.warpAffine(image, matrix, (16, 8), borderValue=(0, 0, 0))
    image = np.clip(image.astype(np.float32)[..., ::2] / 255.0, 0.0, 1.0)
    return np.transpose(image, (2, 0, 1))


def test_what_the_tracer_writes_passes() -> None:
    tracer = EnhancedTracer(max_depth=4, track_memory=False)
    tracer.trace(pipeline)
    described = [c for c in tracer.dag.calls() if c.args]
    assert any(c.name == "cv2.warpAffine" for c in described)
    for call in described:
        assert args_problems(call.args, call.name) == [], call.args


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("not an object", "expected an object, got str"),
        ({"kind": 3}, "kind: expected a string"),
        ({"kind": "array", "shape": [10**6, 10**6], "dtype": "uint8"}, "cannot be rebuilt"),
        ({"kind": "array", "shape": [2, -1], "dtype": "uint8"}, "shape: expected up to 32 sizes"),
        ({"kind": "array", "shape": [2], "dtype": "torch.load"}, "'torch.load' is not a dtype"),
        ({"kind": "array", "shape": [2], "dtype": "uint8", "layout": "Z"}, "layout"),
        ({"kind": "array", "shape": [2], "dtype": "uint8", "device": "gpu!"}, "not a device"),
        (
            {
                "kind": "array",
                "shape": [4],
                "dtype": "uint8",
                "data": base64.b64encode(b"ab").decode(),
            },
            "data: expected the base64 of the 4 array bytes",
        ),
        ({"kind": "scalar", "value": [1]}, "expected a number, string, boolean or null"),
        ({"kind": "scalar", "float": "big"}, "float: expected one of"),
        ({"kind": "sequence", "type": "set", "items": []}, "expected 'tuple' or 'list'"),
        ({"kind": "sequence", "type": "list", "items": [1]}, "items[0]: expected an object"),
        ({"kind": "image", "mode": "RGB", "size": [10**6, 10**6]}, "cannot be rebuilt"),
        ({"kind": "image", "mode": "XYZ", "size": [2, 2]}, "not a PIL image mode"),
        ({"kind": "dtype", "value": "os.system"}, "is not a dtype"),
        ({"kind": "slice", "start": "a"}, "start: expected a whole number or null"),
    ],
)
def test_hostile_descriptions_are_named(entry: object, problem: str) -> None:
    problems = entry_problems(entry, "args[0]")
    assert problems and problem in problems[0], problems


def test_nested_sequences_stop_at_the_depth_cap() -> None:
    entry: dict = {"kind": "scalar", "value": 1}
    for _ in range(6):
        entry = {"kind": "sequence", "type": "tuple", "items": [entry]}
    assert "nested deeper than 4" in " ".join(entry_problems(entry, "args[0]"))


def test_unknown_kinds_and_keys_pass_so_the_format_can_grow() -> None:
    assert entry_problems({"kind": "future", "whatever": [1, 2]}, "x") == []
    assert entry_problems({"kind": "object", "type": "pkg.T", "new_key": 1}, "x") == []
