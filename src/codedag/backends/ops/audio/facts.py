"""What codedag knows about librosa besides its backends: plain data, no imports."""

from codedag.backends.facts import FILE_IO, FileSource, LibraryFacts, Requirement

FACTS = LibraryFacts(
    name="audio",
    modules=("librosa",),
    namespaces=("librosa",),
    # what librosa calls into: library code wherever it is installed
    library_packages=("scipy", "soundfile", "soxr"),
    distributions=("librosa", "numpy", "scipy"),
    non_migratable=dict.fromkeys(("librosa.load", "librosa.stream"), FILE_IO),
    # (waveform, rate): the rate is the sr= asked for when one is given
    file_sources={
        "librosa.load": FileSource("path", item=0, echoes={1: "sr"}),
        "soundfile.read": FileSource("file", item=0),
    },
    requirement=Requirement(
        "librosa", "librosa", "audio pipelines (librosa reference, demo --task audio)", "audio"
    ),
)
