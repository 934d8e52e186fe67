"""The tolerance table, a view of the ops' declarations: every entry names a declared function
and agrees with its fidelity; difference(): a migrated call's result against the library's,
through the table. (The documented tables are checked in test_doc_tables.py.)"""

from __future__ import annotations

import numpy as np
from PIL import Image

from codedag.backends.contract import Fidelity
from codedag.backends.registry import default_registry
from codedag.backends.tolerances import EXACT, TOLERANCES, Tolerance, difference, tolerance_for


def _loose(tol: Tolerance) -> bool:
    return not tol.exact


def test_every_entry_names_a_declared_function() -> None:
    """Entries are keyed by a migrated function's name or alias, or by a declared op the registry
    keeps on the CPU (methods of C types such as ``numpy.ndarray.sum`` cannot be patched)."""
    registry = default_registry()
    known = {alias for name in registry.names() for alias in registry.aliases(name)}
    known |= set(registry.names()) | set(registry.non_migratable)
    assert not sorted(set(TOLERANCES) - known)


def test_canonical_names_share_the_entry_of_the_name_their_op_is_declared_under() -> None:
    registry = default_registry()
    mfcc = registry.canonical("librosa.feature.mfcc")
    assert mfcc != "librosa.feature.mfcc"
    assert tolerance_for(mfcc) is TOLERANCES["librosa.feature.mfcc"]


def test_the_declared_fidelity_and_the_table_agree() -> None:
    """An op declared exact has no slack in the table; one declared within tolerance has some;
    a mismatch allowance comes with the size of the mismatch it allows."""
    registry = default_registry()
    for name in registry.names():
        spec = registry.get(name)
        assert spec is not None
        tol = tolerance_for(name)
        if spec.quirks.fidelity is Fidelity.EXACT:
            assert not _loose(tol), f"{name} is declared exact but has a tolerance {tol}"
        elif spec.quirks.fidelity is Fidelity.TOLERANCE:
            assert _loose(tol), f"{name} is declared within tolerance but has no entry"
        assert (tol.max_mismatch_frac > 0) == (tol.mismatch_atol > 0), name
    assert tolerance_for("no.such.function") is EXACT


def test_equal_and_within_tolerance_are_none() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert difference("cv2.flip", a, a.copy()) is None
    # cv2.resize allows float values within atol 1e-2
    assert difference("cv2.resize", a, a + np.float32(5e-3)) is None
    assert difference("numpy.sum", np.float32(3.0), np.float32(3.0)) is None
    assert difference("numpy.mean", (a, 1), (a.copy(), 1)) is None


def test_each_kind_of_difference_is_named() -> None:
    a = np.zeros((2, 2), np.uint8)
    assert "shape" in (difference("cv2.flip", a, a[:1]) or "")
    assert "dtype" in (difference("cv2.flip", a, a.astype(np.int16)) or "")
    one_off = a.copy()
    one_off[0, 0] = 1
    assert "1 of 4 values" in (difference("cv2.flip", a, one_off) or "")
    assert "ndarray of 2 where the library returns tuple of 1" in (difference("x", (a,), a) or "")
    assert "item 1" in (difference("x", (a, 2), (a, 3)) or "")
    assert difference("numpy.abs", np.array([5.0]), np.array([3.0])) is not None


def test_pil_images_compare_mode_size_and_pixels() -> None:
    img = Image.new("RGB", (4, 3), (1, 2, 3))
    assert difference("PIL.Image.Image.resize", img, img.copy()) is None
    assert "PIL L" in (difference("PIL.Image.Image.resize", img, img.convert("L")) or "")
    other = img.copy()
    other.putpixel((0, 0), (9, 9, 9))
    assert "values" in (difference("PIL.Image.Image.resize", img, other) or "")
