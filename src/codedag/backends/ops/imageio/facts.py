"""What codedag knows about imageio: plain data, no imports.

``imageio.v3.imread`` (and the older ``imageio.imread`` and ``imageio.v2.imread``) decodes an
image file into a NumPy array through a plugin (Pillow, tifffile, ...). No torch backend is
declared: the reads are file sources, so that a cached chain may start there.
"""

from codedag.backends.facts import FileSource, LibraryFacts

_PUBLIC = ("imageio.v3", "imageio.v2", "imageio")

FACTS = LibraryFacts.python_package(
    "imageio",
    ("imageio",),
    _PUBLIC,
    distributions=("imageio",),
    file_sources={
        "imageio.v3.imread": FileSource("uri"),
        "imageio.v2.imread": FileSource("uri"),
        "imageio.imread": FileSource("uri"),
    },
)
