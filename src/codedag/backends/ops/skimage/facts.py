"""What codedag knows about scikit-image: plain data, no imports.

Microscopy, medical and older segmentation pipelines read images with ``skimage.io.imread`` and
resize, rescale and convert them with ``skimage.transform`` and ``skimage.color`` (pure Python
over NumPy and SciPy: a 64x64 anti-aliased ``resize`` of a photo takes milliseconds). No torch
backend is declared for them: they are known so that a cached chain may start at the read and
run through them (its value handed to them as a stand-in, which they read through
``__array__``), under their public names, as SciPy's are.
"""

from codedag.backends.facts import FileSource, LibraryFacts

# the modules pipelines call on their images (scikit-image loads each lazily)
_PUBLIC = (
    "skimage.io",
    "skimage.transform",
    "skimage.color",
    "skimage.exposure",
    "skimage.filters",
    "skimage.util",
)

FACTS = LibraryFacts.python_package(
    "skimage",
    ("skimage",),
    _PUBLIC,
    distributions=("scikit-image",),
    protocols=("__array__",),
    file_sources={"skimage.io.imread": FileSource("fname")},
)
