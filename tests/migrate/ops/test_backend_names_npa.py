"""Backend keys name real library callables, and the tracer's name of each one finds a backend."""

from __future__ import annotations

import importlib
import inspect

import pytest

from codedag.migrate.ops import audio, numpy, pil
from codedag.trace.names import canonical_name


def _resolve(name: str) -> object:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("module", [numpy, pil, audio], ids=lambda m: m.__name__)
def test_keys_resolve_and_traced_names_hit_a_backend(module):
    if module is audio:
        pytest.importorskip("librosa")
    for name, backend in module.BACKENDS.items():
        assert name.split(".")[0] in ("numpy", "PIL", "librosa"), name
        target = _resolve(name)
        assert callable(target), name
        assert callable(backend) and backend.__doc__, name
        traced = canonical_name(target)
        if module is audio:  # Python functions: traced under their defining module
            assert traced.endswith("." + name.rsplit(".", 1)[1]), (name, traced)
            assert _resolve(traced) is target, (name, traced)
        else:
            assert module.BACKENDS.get(traced) is backend, (name, traced)


def test_numpy_aliases_share_one_backend():
    import numpy as np

    assert numpy.BACKENDS[canonical_name(np.power)] is numpy.BACKENDS["numpy.power"]
    assert numpy.BACKENDS[canonical_name(np.concatenate)] is numpy.BACKENDS["numpy.concatenate"]
    assert numpy.BACKENDS[canonical_name(np.abs)] is numpy.BACKENDS["numpy.absolute"]


def test_backends_keep_numpys_parameter_names():
    import numpy as np

    for name in ("add", "clip", "mean", "pad", "transpose", "concatenate"):
        ours = inspect.signature(numpy.BACKENDS[f"numpy.{name}"]).parameters
        first = next(iter(ours))
        assert first in {"x1", "a", "array", "arrays"}, (name, first)
    theirs = inspect.signature(np.mean).parameters
    assert list(inspect.signature(numpy.BACKENDS["numpy.mean"]).parameters)[:5] == list(theirs)[:5]
