"""Why a sample's chain was computed without the cache: each reason's name and what it means.

A module of its own, importing nothing, so that a run's summary can say it without opening the
store.
"""

from __future__ import annotations

MISS_REASONS: dict[str, str] = {
    "new": "new",
    "not_stored": "not in the store: evicted, left unstored, or new arguments after the source",
    "arguments": "an argument without a stable value",
    "diverged": "diverged",
    "source": "a source without a stable identity",
    "error": "the sample failed with cached values and ran again without them",
    "unstorable": "a value the store cannot keep exactly",
    "verify": "a verified hit differed from its recomputation",
    "off": "no usable store",
}
"""Each reason's name (``get_stats()["cache"]["misses"]``) and what it means: ``new``, the
provenance not seen before (a first epoch, a changed file, argument or version); ``not_stored``,
seen (the store holds the header of the cut's input) but the cut's value is not there; the
others as said."""
