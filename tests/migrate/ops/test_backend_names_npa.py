"""Every backend key of the NumPy, PIL and librosa modules names a real library function."""

from __future__ import annotations

import importlib
import inspect

import pytest

from codedag.migrate.ops import audio, numpy, pil


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
def test_keys_resolve_to_library_callables(module):
    if module is audio:
        pytest.importorskip("librosa")
    for name, backend in module.BACKENDS.items():
        assert name.split(".")[0] in ("numpy", "PIL", "librosa"), name
        assert callable(_resolve(name)), name
        assert callable(backend) and backend.__doc__, name


def test_ufunc_backends_keep_numpys_parameter_names():
    import numpy as np

    for name in ("add", "clip", "mean", "pad", "transpose", "concatenate"):
        ours = inspect.signature(numpy.BACKENDS[f"numpy.{name}"]).parameters
        first = next(iter(ours))
        assert first in {"x1", "a", "array", "arrays"}, (name, first)
    theirs = inspect.signature(np.mean).parameters
    assert list(inspect.signature(numpy.BACKENDS["numpy.mean"]).parameters)[:5] == list(theirs)[:5]
