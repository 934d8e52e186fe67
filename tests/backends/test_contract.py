"""The backend contract: what ``declare`` builds from a backend and its quirks, and how an ops
package's modules become one library's specs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from codedag.backends.adapters import ArrayAdapter, TensorAdapter
from codedag.backends.contract import (
    DEVICE,
    EXACT,
    FactoryOp,
    Fidelity,
    Library,
    MoveOnly,
    StandardOp,
    Tolerance,
    collect_specs,
    declare,
    parameters,
)
from codedag.backends.facts import LibraryFacts
from codedag.backends.ops.cv2._adapter import CV2

ARRAYS = ArrayAdapter()


def _backend(src: torch.Tensor, ksize: int, dst: Any = None, *, device: Any = None) -> Any:
    return src


def test_parameters_are_the_positional_names_and_a_keyword_only_device() -> None:
    assert parameters(_backend) == (("src", "ksize", "dst"), True)
    assert parameters(lambda a, *rest, b=1: a) == (("a",), False)
    assert parameters(print) == ((), False)  # a builtin without a signature


def test_declare_takes_the_backends_signature_and_the_adapters_strategy() -> None:
    loose = Tolerance(atol=1e-3, note="float32 sums")
    spec = declare("cv2.demo", _backend, CV2, tolerance=loose, inplace=(0,))
    assert spec.strategy is StandardOp and spec.adapter is CV2 and spec.library == "cv2"
    assert spec.positional_names == ("src", "ksize", "dst")
    assert spec.inject_kwargs == {"device": DEVICE}
    assert spec.quirks.fidelity is Fidelity.TOLERANCE and spec.inplace_args == (0,)
    assert spec.quirks.tolerance is loose
    numpy_spec = declare("numpy.demo", lambda a: a, ARRAYS, positional_names=("a", "b"))
    assert numpy_spec.strategy is MoveOnly and numpy_spec.positional_names == ("a", "b")
    assert not numpy_spec.inject_kwargs


def test_a_factory_gets_its_device_as_an_argument_not_an_injected_keyword() -> None:
    spec = declare("cv2.demo", _backend, CV2, strategy=FactoryOp, data_params=("src",))
    assert spec.strategy is FactoryOp and not spec.inject_kwargs
    assert spec.data_params == ("src",)


def test_torch_move_only_ops_have_no_backend_of_their_own() -> None:
    spec = declare("torch.demo", None, TensorAdapter(), buffers=("out",))
    assert spec.backend is None and spec.positional_names == () and spec.library == "torch"
    assert spec.quirks.buffers == ("out",)


def test_fidelity_follows_from_the_declared_tolerance() -> None:
    """Exact without a tolerance (or with one allowing nothing, a note alone), within tolerance
    with one, differing as declared: the fidelity cannot disagree with the tolerance."""
    exact = declare("numpy.demo", lambda a: a, ARRAYS)
    assert exact.quirks.tolerance is None and exact.quirks.fidelity is Fidelity.EXACT
    noted = declare("numpy.demo", lambda a: a, ARRAYS, tolerance=Tolerance(note="exact"))
    assert noted.quirks.fidelity is Fidelity.EXACT and EXACT.exact
    for loose in (Tolerance(rtol=1e-6), Tolerance(max_mismatch_frac=0.01, mismatch_atol=1)):
        spec = declare("numpy.demo", lambda a: a, ARRAYS, tolerance=loose)
        assert spec.quirks.fidelity is Fidelity.TOLERANCE and not loose.exact
    drawn = declare("numpy.demo", lambda a: a, ARRAYS, random=True, differs="another stream")
    assert drawn.quirks.fidelity is Fidelity.DIFFERS


def test_unknown_quirks_are_a_type_error() -> None:
    with pytest.raises(TypeError):
        declare("numpy.demo", lambda a: a, ARRAYS, fidelty=Fidelity.EXACT)
    with pytest.raises(TypeError):  # the fidelity is not declared: it follows from the tolerance
        declare("numpy.demo", lambda a: a, ARRAYS, fidelity=Fidelity.TOLERANCE)


def test_an_ops_package_collects_the_ops_of_its_public_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "demo_ops"
    package.mkdir()
    (package / "__init__.py").write_text("")
    header = "from codedag.backends.adapters import ArrayAdapter\nfrom codedag.backends.contract import declare\n"
    (package / "b_second.py").write_text(
        header + 'OPS = [declare("numpy.second", lambda a: a, ArrayAdapter())]\n'
    )
    (package / "a_first.py").write_text(
        header
        + textwrap.dedent(
            """
            def first(a):
                return a
            OPS = [declare("numpy.first", first, ArrayAdapter(), notes="first")]
            """
        )
    )
    (package / "_private.py").write_text('raise RuntimeError("helpers are not collected")\n')
    (package / "no_ops.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        specs = collect_specs("demo_ops", [str(package)])
    finally:
        for name in [m for m in sys.modules if m.startswith("demo_ops")]:
            del sys.modules[name]
    assert [s.name for s in specs] == ["numpy.first", "numpy.second"]  # module order
    assert [s.family for s in specs] == ["a_first", "b_second"]
    library = Library(LibraryFacts("demo", ("numpy",)), ARRAYS, specs)
    assert library.name == "demo" and library.namespaces == () and not library.non_migratable
    assert sorted(library.backends()) == ["numpy.first", "numpy.second"]
    assert library.backends()["numpy.first"].__name__ == "first"


def test_every_library_package_is_built_from_its_modules_ops() -> None:
    from codedag.backends.ops import cv2 as cv2_ops

    assert {s.name for s in cv2_ops.LIBRARY.specs} >= {"cv2.resize", "cv2.flip", "cv2.blur"}
    assert cv2_ops.LIBRARY.adapter is CV2
    assert all(s.adapter is CV2 for s in cv2_ops.LIBRARY.specs)
    assert cv2_ops.BACKENDS["cv2.flip"] is cv2_ops.flip  # backends are package attributes
