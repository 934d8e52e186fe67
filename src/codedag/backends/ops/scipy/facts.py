"""What codedag knows about SciPy: plain data, no imports.

Medical and volumetric pipelines resample, rotate and filter arrays with ``scipy.ndimage``
(``zoom``, ``rotate``, ``gaussian_filter``). No torch backend is declared for them: they are
known so that a cached chain may run through them (its value handed to them as a stand-in,
which they read through ``__array__``), under their public names.
"""

from codedag.backends.facts import LibraryFacts

_PUBLIC = ("scipy.ndimage",)  # only what pipelines call on their arrays (not librosa's internals)

FACTS = LibraryFacts(
    name="scipy",
    modules=("scipy",),
    namespaces=_PUBLIC,
    indexed=_PUBLIC,
    python_namespaces=_PUBLIC,
    distributions=("scipy",),
    protocols=("__array__",),
)
