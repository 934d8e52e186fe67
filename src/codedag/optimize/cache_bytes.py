"""A prefix cut's bytes against the compute they spare: why a cut sits where it does (pure).

A value stored at a cut is written once and read back, and copied, in every later epoch, at the
store's measured cost for its size (:mod:`codedag.calibrate.store_costs`). A chain's values differ in
size by much: a decoded uint8 image is a quarter of the float32 image a normalization makes of
it. Between two cuts of a chain, the later one is worth its bytes when the calls between them
(their traced time, computed again in every epoch by the earlier cut) cost more than what its
larger value adds to reading back each epoch, and to storing once spread over the epochs:
:func:`later_pays` is that comparison, the one :func:`codedag.optimize.cache.decide` makes
between every pair of cuts. :func:`smaller_value` finds, for a chosen cut, the chain's smallest
value before it, and :func:`bytes_clause` says in one clause why the cut is not there (or, where
the cut sits before a larger value, why it is not after it).
"""

from __future__ import annotations

from collections.abc import Sequence

from codedag.plan.cache import CacheCut


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.3g} MB"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def saves(cut: CacheCut, min_saving: float) -> bool:
    """Whether a hit at ``cut`` saves more than ``min_saving`` of its prefix's traced time
    (unmeasured cuts, with no read time, are taken as saving)."""
    if not cut.read_ns and not cut.write_ns:
        return True
    return cut.saved_ns > min_saving * cut.prefix_ns


def steps_ns(earlier: CacheCut, later: CacheCut) -> int:
    """Traced time of the calls after ``earlier`` up to and with ``later``."""
    return max(0, later.prefix_ns - earlier.prefix_ns)


def later_pays(earlier: CacheCut, later: CacheCut, epochs: int) -> bool:
    """Whether cutting at ``later`` saves more over ``epochs`` epochs than at ``earlier``: the
    calls between them, computed in every epoch after the first by the earlier cut, against
    what the later value adds to reading back in those epochs and to storing once."""
    cached_epochs = max(1, epochs - 1)
    extra_read = later.read_ns - earlier.read_ns
    extra_write = later.write_ns - earlier.write_ns
    return cached_epochs * (steps_ns(earlier, later) - extra_read) > extra_write


def smaller_value(
    candidates: Sequence[CacheCut], cut: CacheCut, min_saving: float
) -> CacheCut | None:
    """The value before ``cut`` holding the fewest bytes (the latest of equals), among the
    candidates a hit would save time at; ``None`` where none holds fewer bytes than the cut."""
    found: CacheCut | None = None
    for cand in candidates:
        if cand.position >= cut.position or not cand.bytes_per_sample:
            continue
        if cand.bytes_per_sample >= cut.bytes_per_sample or not saves(cand, min_saving):
            continue
        if found is None or cand.bytes_per_sample <= found.bytes_per_sample:
            found = cand
    return found


def _larger_value(
    candidates: Sequence[CacheCut], cut: CacheCut, min_saving: float
) -> CacheCut | None:
    """The value after ``cut`` whose hit would save the most traced time, where it holds more
    bytes than the cut (``None`` otherwise)."""
    later = [
        c
        for c in candidates
        if c.position > cut.position and c.bytes_per_sample and saves(c, min_saving)
    ]
    best = max(later, key=lambda c: c.saved_ns, default=None)
    return best if best is not None and best.bytes_per_sample > cut.bytes_per_sample else None


def bytes_clause(
    candidates: Sequence[CacheCut], cut: CacheCut, epochs: int, min_saving: float
) -> str:
    """Why ``cut`` sits where it does against the chain's other values, in one clause (empty
    where no other value of the chain saves time at a different size)."""
    smaller = smaller_value(candidates, cut, min_saving)
    if smaller is not None and later_pays(smaller, cut, epochs):
        ratio = cut.bytes_per_sample / max(1, smaller.bytes_per_sample)
        return (
            f"not at {smaller.step}'s {ratio:.3g}x smaller value ({_mb(smaller.bytes_per_sample)}"
            f" {smaller.dtype}): the calls after it take {_ms(steps_ns(smaller, cut))} traced, "
            f"more than the {_ms(cut.read_ns - smaller.read_ns)} its extra bytes add to each "
            f"read ({_ms(cut.write_ns - smaller.write_ns)} to storing once)"
        )
    larger = _larger_value(candidates, cut, min_saving)
    if larger is not None and not later_pays(cut, larger, epochs):
        ratio = larger.bytes_per_sample / max(1, cut.bytes_per_sample)
        return (
            f"before {larger.step}'s {ratio:.3g}x larger value ({_mb(larger.bytes_per_sample)} "
            f"{larger.dtype}): its extra bytes would add {_ms(larger.read_ns - cut.read_ns)} to "
            f"each read ({_ms(larger.write_ns - cut.write_ns)} to storing once), more than the "
            f"{_ms(steps_ns(cut, larger))} traced of the calls after the cut"
        )
    return ""
