"""What codedag knows about librosa besides its backends: plain data, no imports."""

from codedag.backends.facts import FILE_IO, LibraryFacts, Requirement

FACTS = LibraryFacts(
    name="audio",
    modules=("librosa",),
    namespaces=("librosa",),
    # what librosa calls into: library code wherever it is installed
    library_packages=("scipy", "soundfile", "soxr"),
    distributions=("librosa", "numpy", "scipy"),
    non_migratable=dict.fromkeys(("librosa.load", "librosa.stream"), FILE_IO),
    requirement=Requirement(
        "librosa", "librosa", "audio pipelines (librosa reference, demo --task audio)", "audio"
    ),
)
