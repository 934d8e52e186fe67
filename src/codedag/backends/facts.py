"""What a library package says about its library as plain data, before any backend is imported.

Each ``codedag.backends.ops.<library>`` package has a ``facts.py`` module defining ``FACTS``, a
:class:`LibraryFacts`: the top-level modules its functions live in, the namespaces the tracer
indexes or wraps, the functions that must stay on the CPU, the distributions whose versions key
calibration, and what ``codedag doctor`` reports about it. The central tables of the tracer, the
registry and calibration are views over these facts (:mod:`codedag.backends.libraries`).

A facts module imports nothing but this module: the tracer reads facts without importing torch or
the library itself. This module imports nothing of codedag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FILE_IO = "file or network I/O"
CODEC = "decoder or encoder of a compressed format (CPU library code)"
VIEW = "returns a view of its input: O(1) on the CPU, and a copy would break aliasing"


@dataclass(frozen=True)
class Requirement:
    """The distribution a library comes from, as ``codedag doctor`` reports it.

    Attributes:
        distribution: the distribution's name (``opencv-python-headless``).
        module: its import name (``cv2``).
        purpose: what it is for, in words.
        extra: the optional extra of codedag that installs it; ``""`` for a core dependency.
    """

    distribution: str
    module: str
    purpose: str
    extra: str = ""


@dataclass(frozen=True)
class FileSource:
    """A function that reads a file (or an encoded buffer read from one) and computes its result
    from it and its other, constant arguments only: a chain of the prefix cache may start there.

    Attributes:
        argument: the parameter naming the file (``"filename"``, ``"fp"``, ``"path"``): a path,
            an open file or the bytes read from one.
        position: its position when passed positionally.
        item: for a function returning a tuple, the item the sample goes on computing with
            (``librosa.load``'s waveform); ``None``: the result itself.
        echoes: for a tuple result, items equal to an argument's value when that argument is
            given (``librosa.load``'s rate is its ``sr=``): where every item but ``item`` is an
            echo of an argument given, a stored value is read back without running the call;
            otherwise the call runs and only what follows it is read back (``soundfile.read``'s
            rate is the file's).
        length: for a tuple result, its length.
        opened_from: where ``argument`` is an object opened from a file that the call reads
            further (NumPy's ``NpzFile``, read by key), the attribute holding that file, whose
            path identifies the source (``"fid"``); ``""``: the argument is the file itself.
        reads_later: the result goes on reading an open file it was given after the call
            returns (a PIL image decodes at ``load()``): running the call at once would keep
            nothing from the file's closing.
        reopen: for an ``opened_from`` object, a function of the object and its file's path
            returning the object opened again, with its settings, for a read that runs after
            user code closed it (``with np.load(path) as z: img = z["image"]``, the cut after
            the block); ``None``: the read runs at once, before anything can close it.
    """

    argument: str
    position: int = 0
    item: int | None = None
    echoes: Mapping[int, str] = field(default_factory=dict)
    length: int = 2
    opened_from: str = ""
    reads_later: bool = False
    reopen: Callable[[Any, str], Any] | None = None


@dataclass(frozen=True)
class ThreadPool:
    """A library's own thread pool, which DataLoader workers size (:mod:`codedag.migrate.
    worker_threads`).

    Attributes:
        set_threads: the module function setting its thread count (``setNumThreads``).
        get_threads: the function reading it (``getNumThreads``).
        env: the environment variable the library reads when it loads.
        joins_on_shrink: shrinking the pool joins its threads: a forked child must not shrink a
            pool it inherited with threads (they exist only in the parent), so the parent stops
            it just before forking.
    """

    set_threads: str
    get_threads: str
    env: str
    joins_on_shrink: bool = False


@dataclass(frozen=True)
class LibraryFacts:
    """Plain facts about one library, declared by its ops package.

    Attributes:
        name: the ops package's name (``cv2``, ``pil``, ``audio``).
        modules: top-level modules the library's canonical names start with (``PIL``).
        namespaces: modules whose public names are searched for aliases of each declared op.
        indexed: modules whose public callables define canonical names, in priority order (the
            first name of an object wins): C functions without a usable ``__module__``.
        python_namespaces: modules whose public functions are implemented in Python (behind a
            dispatcher or plain): the code objects of their implementations carry the public name.
        wrapped: modules whose public C callables the tracer wraps to see arguments and results.
        not_wrapped: qualified names in ``wrapped`` modules never wrapped (wrapping them would
            change behaviour or recurse into the tracer).
        library_packages: top-level packages besides ``modules`` whose code the tracer treats as
            library code wherever they are installed (what the library calls into).
        data_types: ``(module, attribute)`` of the library's data value types, which the tracer
            follows through user code.
        distributions: distributions whose versions a timing of the library's functions depends
            on (the calibration cache's key); torch's version is always part of it.
        non_migratable: functions of the library that must stay on the CPU, with the reason.
        random_prefixes: prefixes of the library's functions whose results are random draws,
            placed only on request even without a backend.
        requirement: what ``codedag doctor`` checks for the library (``None``: nothing).
        file_sources: functions reading a file whose chains the prefix cache may keep, each
            with the argument holding the file (keyed by any public name).
        protocols: the protocols through which the library's functions take a value that is
            not its own array (``__array__``, ``__array_function__``, ``__torch_function__``):
            a stand-in value reaches them through these. A library with none (cv2, Pillow)
            takes its own arrays only, and a stand-in must be computed before it is called.
        arrays_only: functions of a library with ``protocols`` that take its own arrays only
            all the same (``torch.from_numpy`` takes a NumPy array, nothing with
            ``__array__``): a stand-in must be computed before they are called.
        thread_pool: the library's own thread pool (``None``: none to size).
        verified_below: the first release of the library whose behaviour its backends were not
            verified against (``"5.1"``): with it or a newer one installed (the first of
            ``distributions`` found), none of its backends is used and its calls stay with it.
    """

    name: str
    modules: tuple[str, ...]
    namespaces: tuple[str, ...] = ()
    indexed: tuple[str, ...] = ()
    python_namespaces: tuple[str, ...] = ()
    wrapped: tuple[str, ...] = ()
    not_wrapped: tuple[str, ...] = ()
    library_packages: tuple[str, ...] = ()
    data_types: tuple[tuple[str, str], ...] = ()
    distributions: tuple[str, ...] = ()
    non_migratable: Mapping[str, str] = field(default_factory=dict)
    random_prefixes: tuple[str, ...] = ()
    requirement: Requirement | None = None
    file_sources: Mapping[str, FileSource] = field(default_factory=dict)
    protocols: tuple[str, ...] = ()
    arrays_only: tuple[str, ...] = ()
    thread_pool: ThreadPool | None = None
    verified_below: str | None = None

    @classmethod
    def one_module(cls, module: str, **facts: Any) -> LibraryFacts:
        """A library that is one module (``cv2``, ``random``): its name, its only module,
        namespace, indexed and wrapped module; ``facts`` the others."""
        one = (module,)
        return cls(module, one, namespaces=one, indexed=one, wrapped=one, **facts)

    @classmethod
    def python_package(
        cls, name: str, modules: tuple[str, ...], public: tuple[str, ...], **facts: Any
    ) -> LibraryFacts:
        """A library written in Python (SciPy's, scikit-image's, imageio's functions): its
        ``public`` modules are searched, indexed and name the code of its functions; ``facts``
        the others."""
        return cls(
            name, modules, namespaces=public, indexed=public, python_namespaces=public, **facts
        )

    def owns(self, name: str) -> bool:
        """Whether the qualified ``name`` belongs to one of the library's modules, or is one of
        its file sources (``soundfile.read``, which librosa reads files with)."""
        return name.split(".", 1)[0] in self.modules or name in self.file_sources

    def unverified_version(self) -> str | None:
        """The installed version of the library when it is at or past :attr:`verified_below`
        (its backends were not verified against it), else None."""
        if self.verified_below is None:
            return None
        import importlib.metadata

        for distribution in self.distributions:
            try:
                installed = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                continue
            return installed if _release(installed) >= _release(self.verified_below) else None
        return None


def _release(text: str) -> tuple[int, ...]:
    """The first three numbers of a version (``5.1.0.95`` -> ``(5, 1, 0)``)."""
    import re

    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])
