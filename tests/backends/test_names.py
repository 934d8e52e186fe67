"""Canonical names: one public name per function object."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from codedag.backends.names import canonical_name


def test_aliases_take_the_name_of_the_object_itself() -> None:
    assert canonical_name(np.transpose) == "numpy.transpose"
    if hasattr(np, "permute_dims"):  # NumPy 2 alias of the same object
        assert canonical_name(np.permute_dims) == "numpy.transpose"
    assert canonical_name(np.clip) == "numpy.clip"


def test_numpy_dispatched_functions_get_public_names_and_real_arguments() -> None:
    import sys

    from codedag.trace import EnhancedTracer

    def pipeline(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        joined = np.concatenate([a, b], axis=0)
        picked = np.where(joined > 0.5, joined, 0.0)
        spectrum = np.fft.rfft(picked)  # numpy.fft may be imported lazily, inside the window
        return np.clip(np.abs(spectrum), 0, 10)

    a, b = np.ones(3), np.zeros(2)
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        pipeline(a, b)
    dag = tracer.dag
    names = [n.name for n in dag.calls() if n.depth == 1]
    # the operations in the arguments (joined > 0.5, np.abs) are steps of their own
    assert names == [
        "numpy.concatenate",
        "operator.gt",
        "numpy.where",
        "numpy.fft.rfft",
        "numpy.absolute",
        "numpy.clip",
    ]
    assert not any("dispatcher" in n.name or "multiarray" in n.name for n in dag.calls())
    concat, gt, where, rfft, absolute, clip = (
        next(n for n in dag.calls() if n.name == k) for k in names
    )
    assert concat.args[0]["kind"] == "sequence" and len(concat.args[0]["items"]) == 2
    assert concat.args[0]["items"][0]["shape"] == [3] and concat.args[1]["name"] == "axis"
    assert sorted(dag.dataflow_successors(concat.id)) == sorted([gt.id, where.id])
    assert dag.dataflow_successors(gt.id) == [where.id]
    assert dag.dataflow_successors(where.id) == [rfft.id]
    assert dag.dataflow_successors(rfft.id) == [absolute.id]
    assert dag.dataflow_successors(absolute.id) == [clip.id]
    (joined,) = dag.successors(concat.id, "produces")
    assert dag.nodes[joined].shape == [5]
    assert clip.args[0]["name"] == "a" and clip.args[0]["shape"] == [3]  # abs(rfft(5 values))
    assert "numpy.fft" in sys.modules
    assert (
        canonical_name(np.fft.rfft) == canonical_name(np.fft.rfft.__wrapped__) == "numpy.fft.rfft"
    )
    assert canonical_name(np.concat) == "numpy.concatenate"


def test_traced_numpy_names_resolve_to_registry_entries() -> None:
    from codedag.backends.registry import default_registry

    registry = default_registry()
    for fn in (np.concatenate, np.where, np.clip, np.transpose):
        name = canonical_name(fn)
        assert registry.get(name) is not None or registry.non_migratable.get(name), name


def test_a_function_replaced_while_its_module_was_indexed_keeps_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cv2

    from codedag.backends import names

    original = cv2.warpAffine

    def wrapper(*args: object, **kwargs: object) -> object:  # a profiler's or a test's wrapper
        return original(*args, **kwargs)

    # a fresh index, built while cv2.warpAffine is the wrapper
    monkeypatch.setattr(names, "_index", {})
    monkeypatch.setattr(names, "_indexed", {})
    monkeypatch.setattr(names, "_seen", [(-1, ())])
    with monkeypatch.context() as patched:
        patched.setattr(cv2, "warpAffine", wrapper)
        assert canonical_name(cv2.resize) == "cv2.resize"  # indexes cv2 now
    assert cv2.warpAffine is original
    assert canonical_name(original) == "cv2.warpAffine"


def test_a_lazily_loaded_namespace_names_what_it_loads_after_a_first_scan() -> None:
    # scikit-image's modules fill their namespace as names are first used (lazy_loader): a scan
    # made before ``resize`` was used must not leave it under its private module's name
    script = """
import skimage.transform
from codedag.backends import names
names.public_code_name(names.public_code_name.__code__)
from skimage.transform import resize
print(names.public_code_name(resize.__code__), names.canonical_name(resize))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["skimage.transform.resize", "skimage.transform.resize"]


def test_a_decorators_wrapper_shared_by_public_functions_is_named_after_the_one_it_wraps() -> None:
    from skimage import io

    from codedag.backends.names import canonical_name, is_shared_wrapper, public_code_name

    assert io.imread.__code__ is io.imread_collection.__code__  # one wrapper's code for both
    assert canonical_name(io.imread) == "skimage.io.imread"
    assert canonical_name(io.imread_collection) == "skimage.io.imread_collection"
    assert is_shared_wrapper(io.imread.__code__)
    assert public_code_name(io.imread.__code__) is None
    assert public_code_name(io.imread.__wrapped__.__code__) == "skimage.io.imread"
