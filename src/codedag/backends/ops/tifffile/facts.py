"""What codedag knows about tifffile: plain data, no imports.

Satellite, microscopy and medical pipelines read multi-band or 16-bit TIFF files with
``tifffile.imread`` into NumPy arrays. No torch backend is declared: the read is a file source,
so that a cached chain may start there.
"""

from codedag.backends.facts import FileSource, LibraryFacts

FACTS = LibraryFacts.python_package(
    "tifffile",
    ("tifffile",),
    ("tifffile",),
    distributions=("tifffile",),
    file_sources={"tifffile.imread": FileSource("files")},
)
