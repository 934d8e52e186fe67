"""What codedag knows about SciPy: plain data, no imports.

Medical and volumetric pipelines resample, rotate and filter arrays with ``scipy.ndimage``
(``zoom``, ``rotate``, ``gaussian_filter``); audio pipelines read WAV files with
``scipy.io.wavfile.read`` and resample them with ``scipy.signal.resample_poly``; EEG and
medical data sets read MATLAB files with ``scipy.io.loadmat``. No torch
backend is declared for them: they are known so that a cached chain may start at the read and
run through them (its value handed to them as a stand-in, which they read through
``__array__``), under their public names.
"""

from codedag.backends.facts import FileSource, LibraryFacts

# only what pipelines call on their arrays (not librosa's internals)
_PUBLIC = ("scipy.ndimage", "scipy.signal", "scipy.io.wavfile", "scipy.io")

FACTS = LibraryFacts.python_package(
    "scipy",
    ("scipy",),
    _PUBLIC,
    distributions=("scipy",),
    protocols=("__array__",),
    file_sources={
        # (rate, data): the rate is the file's, so the read runs and what follows is read back
        "scipy.io.wavfile.read": FileSource("filename", item=1),
        # a MATLAB file's variables, by name (EEG and medical data sets): mat["data"]
        "scipy.io.loadmat": FileSource("file_name"),
    },
)
