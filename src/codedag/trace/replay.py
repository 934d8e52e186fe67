"""Random state for replaying a DataLoader batch: snapshots, and the seeding of worker 0.

A DataLoader worker seeds Python's ``random``, NumPy's global generator and torch's default
generator from the iterator's base seed before it loads anything (torch's ``_worker_loop``):
``random.seed(base + id)``, ``torch.manual_seed(base + id)`` and
``numpy.random.seed(_generate_state(base, id))``, sets ``torch.set_num_threads(1)`` and the
worker info, then runs ``worker_init_fn(id)``. :func:`worker_zero` does the same in the calling
process, so the first batch (which torch always hands to worker 0) can be replayed where the
tracer runs. :class:`RandomSnapshot` saves and restores everything these touch, plus the random
generators a dataset holds as attributes, so each replay starts from the same state and tracing
leaves the process as it found it. :func:`recorded_generators` lets the traced samples' draws
from a NumPy generator the data set holds show in the trace.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from codedag.errors import TraceError

if TYPE_CHECKING:
    from torch.utils.data import DataLoader


def _generator_attributes(obj: object) -> list[tuple[Any, str]]:
    """``(owner, attribute)`` of random generators held by a dataset (one level deep)."""
    numpy = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    kinds: list[type] = [random.Random]
    if numpy is not None:
        kinds += [numpy.random.Generator, numpy.random.RandomState]
    if torch is not None:
        kinds.append(torch.Generator)
    namespace = getattr(obj, "__dict__", None)
    if not isinstance(namespace, dict):
        return []
    return [(obj, k) for k, v in list(namespace.items()) if isinstance(v, tuple(kinds))]


def _state_of(generator: Any) -> Any:
    numpy = sys.modules.get("numpy")
    if isinstance(generator, random.Random):
        return generator.getstate()
    if numpy is not None and isinstance(generator, numpy.random.Generator):
        return generator.bit_generator.state
    if numpy is not None and isinstance(generator, numpy.random.RandomState):
        return generator.get_state()
    return generator.get_state()  # torch.Generator


def _set_state(generator: Any, state: Any) -> None:
    numpy = sys.modules.get("numpy")
    if isinstance(generator, random.Random):
        generator.setstate(state)
    elif numpy is not None and isinstance(generator, numpy.random.Generator):
        generator.bit_generator.state = state
    elif numpy is not None and isinstance(generator, numpy.random.RandomState):
        generator.set_state(state)
    else:
        generator.set_state(state)


_RECORDING_TYPES: dict[type, type] = {}
"""Each NumPy generator type's subclass whose draws are recording wrappers (made once)."""


def _recording_type(kind: type) -> type:
    """A subclass of ``kind`` (a NumPy ``Generator`` or ``RandomState`` type) whose public
    methods are recording wrappers of its own: an instance is still a ``kind`` to every check."""
    from codedag.backends.names import canonical_name
    from codedag.trace.filter import library_key
    from codedag.trace.interpose import make_wrapper

    found = _RECORDING_TYPES.get(kind)
    if found is None:
        library = library_key(kind.__module__)
        methods = {
            name: make_wrapper(canonical_name(member), library, member)
            for name in dir(kind)
            if not name.startswith("_")
            and callable(member := getattr(kind, name))
            and not isinstance(member, type | property)
        }
        found = _RECORDING_TYPES[kind] = type(f"Recorded{kind.__name__}", (kind,), methods)
    return found


def _recording(generator: Any) -> Any:
    """A generator drawing from ``generator``'s own bit generator (one stream: each draw moves
    both) whose draws are recorded; None for a generator that is not NumPy's, or whose type
    takes no bit generator."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(
        generator, numpy.random.Generator | numpy.random.RandomState
    ):
        return None  # Python's random.Random is Python code, traced; torch's draws are calls
    bits = (
        generator.bit_generator
        if isinstance(generator, numpy.random.Generator)
        else getattr(generator, "_bit_generator", None)
    )
    try:
        return _recording_type(type(generator))(bits) if bits is not None else None
    except Exception:  # a subclass of the user's with another constructor: left as it is
        return None


@contextlib.contextmanager
def recorded_generators(holder: object) -> Iterator[None]:
    """Within the block, each NumPy ``Generator`` or ``RandomState`` ``holder`` keeps as an
    attribute (one level deep, as a data set's ``self.rng``) is one of a subclass whose methods
    are recording wrappers, drawing from the same bit generator: their Cython methods make no
    profiling event, so a plan would not see those draws. The generator itself is put back at
    the end (a ``RandomState``'s cached normal draw is its own: the trace's draws of
    ``standard_normal`` may differ from the script's, never the script's own)."""
    swapped = []
    for owner, name in _generator_attributes(holder):
        generator = getattr(owner, name)
        stand_in = _recording(generator)
        if stand_in is not None:
            vars(owner)[name] = stand_in
            swapped.append((owner, name, generator))
    try:
        yield
    finally:
        for owner, name, generator in swapped:
            vars(owner)[name] = generator


class RandomSnapshot:
    """The random state a batch depends on, saved now and put back by :meth:`restore`.

    Covers Python's ``random``, NumPy's global generator (when NumPy is imported), torch's
    default CPU generator, the given generators (a DataLoader's and its sampler's), the random
    generators held as attributes of the given objects (a dataset's ``self.rng``), torch's
    thread count and the DataLoader worker info.
    """

    def __init__(self, generators: tuple[Any, ...] = (), holders: tuple[Any, ...] = ()) -> None:
        import torch
        from torch.utils.data._utils import worker

        self._python = random.getstate()
        numpy = sys.modules.get("numpy")
        self._numpy = numpy.random.get_state() if numpy is not None else None
        self._torch = torch.get_rng_state()
        self._threads = torch.get_num_threads()
        self._worker_info = worker._worker_info
        self._generators = [(g, _state_of(g)) for g in generators if g is not None]
        self._attributes = [
            (owner, name, _state_of(getattr(owner, name)))
            for holder in holders
            for owner, name in _generator_attributes(holder)
        ]

    def restore(self) -> None:
        """Put every saved state back."""
        import torch
        from torch.utils.data._utils import worker

        random.setstate(self._python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self._numpy is not None:
            numpy.random.set_state(self._numpy)
        torch.set_rng_state(self._torch)
        if torch.get_num_threads() != self._threads:
            torch.set_num_threads(self._threads)
        worker._worker_info = self._worker_info
        for generator, state in self._generators:
            _set_state(generator, state)
        for owner, name, state in self._attributes:
            _set_state(getattr(owner, name), state)


def worker_seeds(base_seed: int, worker_id: int) -> tuple[int, Any]:
    """``(seed of random and torch, seed of numpy.random)`` of a worker, as torch computes them."""
    try:
        from torch.utils.data._utils.worker import _generate_state
    except ImportError as error:  # a torch without it: the replay cannot match
        raise TraceError(
            f"this torch has no DataLoader worker seeding to reproduce ({error})"
        ) from error
    return base_seed + worker_id, _generate_state(base_seed, worker_id)


@contextlib.contextmanager
def worker_zero(loader: DataLoader[Any], base_seed: int) -> Iterator[None]:
    """Run the block as DataLoader worker 0 of ``loader`` would run its first task.

    Seeds ``random``, NumPy and torch like torch's worker loop, sets one torch thread and the
    worker info (``get_worker_info()`` returns worker 0), runs ``worker_init_fn(0)``. The caller
    restores the previous state (see :class:`RandomSnapshot`).
    """
    import torch
    from torch.utils.data._utils import worker

    seed, numpy_seed = worker_seeds(base_seed, 0)
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(numpy_seed)
    torch.set_num_threads(1)
    worker._worker_info = worker.WorkerInfo(
        id=0, num_workers=loader.num_workers, seed=seed, dataset=loader.dataset
    )
    if loader.worker_init_fn is not None:
        loader.worker_init_fn(0)
    yield
