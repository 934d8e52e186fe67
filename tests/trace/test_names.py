"""Canonical names: one public name per function object."""

from __future__ import annotations

import numpy as np

from codedag.trace.names import canonical_name


def test_aliases_take_the_name_of_the_object_itself() -> None:
    assert canonical_name(np.transpose) == "numpy.transpose"
    if hasattr(np, "permute_dims"):  # NumPy 2 alias of the same object
        assert canonical_name(np.permute_dims) == "numpy.transpose"
    assert canonical_name(np.clip) == "numpy.clip"
