"""What codedag knows about NumPy besides its backends: plain data (and how an archive
opens again), no imports."""

from typing import Any

from codedag.backends.facts import FILE_IO, VIEW, FileSource, LibraryFacts

_IO = ("load", "save", "savez", "loadtxt", "fromfile", "genfromtxt")
_VIEWS = (
    "transpose",
    "swapaxes",
    "moveaxis",
    "flip",
    "fliplr",
    "flipud",
    "rot90",
    "reshape",
    "squeeze",
    "expand_dims",
    "ravel",
    "broadcast_to",
    "asarray",
    "ascontiguousarray",
)
_GLOBAL_STATE = "draws from NumPy's global random state: a device RNG gives other numbers"


def _reopened_archive(archive: Any, path: str) -> Any:
    """``archive`` (an ``NpzFile`` opened from ``path``) opened again with its settings."""
    settings = ("allow_pickle", "pickle_kwargs", "max_header_size")  # the last: NumPy 1.24+
    given = {name: getattr(archive, name) for name in settings if hasattr(archive, name)}
    return type(archive)(open(path, "rb"), own_fid=True, **given)


FACTS = LibraryFacts(
    name="numpy",
    modules=("numpy",),
    namespaces=("numpy", "numpy.fft", "numpy.linalg", "numpy.random"),
    indexed=("numpy", "numpy.linalg", "numpy.fft", "numpy.random"),
    # public functions implemented in Python (behind the array-function dispatcher, or plain)
    python_namespaces=(
        "numpy",
        "numpy.linalg",
        "numpy.fft",
        "numpy.lib.stride_tricks",
        "numpy.lib.scimath",
    ),
    wrapped=("numpy", "numpy.linalg", "numpy.fft", "numpy.random"),
    # numpy.source exists before NumPy 2.0
    not_wrapped=("numpy.test", "numpy.show_config", "numpy.info", "numpy.source"),
    data_types=(("numpy", "ndarray"),),
    distributions=("numpy",),
    non_migratable={
        **{f"numpy.{n}": FILE_IO for n in _IO},
        **{f"numpy.{n}": VIEW for n in _VIEWS},
        **{f"numpy.random.{n}": _GLOBAL_STATE for n in ("seed", "get_state", "set_state")},
    },
    random_prefixes=("numpy.random.",),
    file_sources={
        **{f"numpy.{n}": FileSource("file") for n in ("load", "fromfile")},
        # text tables (a point cloud's XYZ rows): parsing them is most of a sample
        **{f"numpy.{n}": FileSource("fname") for n in ("loadtxt", "genfromtxt")},
        # an .npz archive read by key: each array a source of its own, the archive's file and
        # the key identifying it (the archive itself goes to as many reads as it has arrays)
        "numpy.lib.npyio.NpzFile.__getitem__": FileSource(
            "self", opened_from="fid", reopen=_reopened_archive
        ),
    },
    protocols=("__array__", "__array_function__", "__array_ufunc__"),
)
