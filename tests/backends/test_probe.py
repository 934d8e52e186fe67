"""probe: one library call through the migrated path with no patch and no fallback (what
calibration times), and the original function a name designates."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from migrate_support import CALLS, boom, make_registry

from codedag.backends.contract import DeclaredUnsupported
from codedag.backends.probe import migrated_call, original_function
from codedag.errors import MigrationError


def test_original_function_resolves_functions_and_methods() -> None:
    assert original_function("cv2.resize") is cv2.resize
    assert original_function("numpy.clip") is np.clip
    from PIL import Image

    assert original_function("PIL.Image.Image.resize") is Image.Image.resize


def test_original_function_refuses_what_is_not_callable() -> None:
    with pytest.raises(MigrationError, match="not callable"):
        original_function("numpy.pi")


def test_migrated_call_runs_the_backend_and_returns_what_the_library_returns() -> None:
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    call = migrated_call("cv2.flip")
    assert call.__name__ == "migrated_flip"
    got = call(img, 1)
    assert isinstance(got, np.ndarray) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, cv2.flip(img, 1))
    assert not np.shares_memory(got, img)


def test_migrated_call_never_falls_back() -> None:
    """A refused call raises: calibration must see that a backend cannot run a signature."""
    img = np.zeros((4, 6, 3), np.uint8)
    with pytest.raises(DeclaredUnsupported, match="dst= writes into a caller's buffer"):
        migrated_call("cv2.flip")(img, 1, dst=np.empty_like(img))
    before = CALLS["boom"]
    failing = migrated_call("cv2.flip", registry=make_registry(**{"cv2.flip": boom}))
    with pytest.raises(RuntimeError, match="injected failure"):
        failing(img, 1)
    assert CALLS["boom"] == before + 1


def test_migrated_call_of_a_name_without_a_backend() -> None:
    with pytest.raises(MigrationError, match="no torch backend"):
        migrated_call("cv2.imread")
    with pytest.raises(MigrationError, match="no torch backend"):
        migrated_call("numpy.no_such_function")
