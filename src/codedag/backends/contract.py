"""The backend contract: what every op declares next to its backend, before anything runs.

An op is one library function (canonical name) with a torch backend and its declared quirks
(:class:`Quirks`): which calls it does not support (checked on the library's own arguments before
any value is converted), the layout its results come back in, the arguments it writes in place,
which parameters may differ per sample of a batch, whether it draws random numbers and how close
it comes to the library. The registry holds one :class:`OpSpec` per canonical name; an
:class:`Adapter`, one per library, converts the library's values to the backend's and back, so the
executor (:mod:`codedag.backends.executor`) is the same for every library.

This module is the leaf of ``codedag.backends``: it imports nothing else of it (the value types
and the library facts only for annotations).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from codedag.errors import UnsupportedOperation

if TYPE_CHECKING:
    from codedag.backends.device_values import CallValues, ValueConverter
    from codedag.backends.facts import LibraryFacts


class DeclaredUnsupported(UnsupportedOperation):
    """A call outside an op's declared domain, refused before its backend runs (the original
    library function runs instead, with this reason counted)."""


class _Device:
    def __repr__(self) -> str:
        return "DEVICE"


DEVICE: Any = _Device()
"""Value of an ``OpSpec.inject_kwargs`` entry that the executor replaces by the call's device."""


class _NotTaken:
    def __repr__(self) -> str:
        return "NOT_TAKEN"


NOT_TAKEN: Any = _NotTaken()
"""What a :data:`FastPath` returns for a call outside its case (nothing was converted or run)."""

MAX_OUTPUT_VALUES = 2**28
"""Results larger than this (in values) stay with the library, decided before anything is
converted: a backend's intermediates take several times the result's memory, where the library
allocates once, or refuses at once what cannot exist."""

FastPath = Callable[[Callable[..., Any], tuple[Any, ...], Mapping[str, Any], "ValueConverter"], Any]
"""``(backend, args, kwargs, converter) -> result``: an adapter's conversion of one op's common
calls in a single pass, or :data:`NOT_TAKEN` (the executor then takes the general path)."""


class Strategy(str, enum.Enum):
    """How a library call becomes a backend call."""

    MOVE_ONLY = "MoveOnly"
    """Move array inputs to the device and call the backend with the same arguments."""
    STANDARD_OP = "StandardOp"
    """Adapt the arguments (batch axis, value maps, renames, injected kwargs) then call."""
    FACTORY_OP = "FactoryOp"
    """Build (once per configuration) a transform from the configuration arguments, apply it."""


MoveOnly = Strategy.MOVE_ONLY
StandardOp = Strategy.STANDARD_OP
FactoryOp = Strategy.FACTORY_OP


class Fidelity(str, enum.Enum):
    """How close an op's backend comes to the library function it replaces (read from its
    declaration: :attr:`Quirks.fidelity`)."""

    EXACT = "exact"
    """Bit-exact on the declared domain (no tolerance, or one without slack)."""
    TOLERANCE = "within tolerance"
    """Within the op's declared :class:`Tolerance`."""
    DIFFERS = "differs"
    """Differs beyond any tolerance (another random stream, ...): placed only on request."""


@dataclass(frozen=True)
class Tolerance:
    """How close a backend's output must be to the library's.

    ``atol`` is absolute on the library's output scale (0..255 for uint8 images), ``rtol``
    relative to each element, ``scale_rtol`` relative to the largest magnitude of the library's
    output (transforms such as FFTs spread their rounding over every element: an element's error
    follows the whole output's scale, not its own); ``max_mismatch_frac`` allows a fraction of
    elements to differ by more (uint8 rounding at exact .5 ties, nearest-neighbour index ties),
    each by at most ``mismatch_atol``. ``note`` says where a difference comes from (or what makes
    the backend exact).
    """

    atol: float = 0.0
    rtol: float = 0.0
    max_mismatch_frac: float = 0.0
    mismatch_atol: float = 0.0
    note: str = ""
    scale_rtol: float = 0.0

    @property
    def exact(self) -> bool:
        """Whether it allows no difference at all (a note alone)."""
        return not (
            self.atol
            or self.rtol
            or self.scale_rtol
            or self.max_mismatch_frac
            or self.mismatch_atol
        )

    def allowed(self, expected: Any) -> Any:
        """The difference each element of the library's output ``expected`` may have (NumPy
        in, NumPy out; non-finite elements count as 0 in magnitudes)."""
        magnitude = np.abs(np.where(np.isfinite(expected), expected, 0))
        allowed = self.atol + self.rtol * magnitude
        if self.scale_rtol and magnitude.size:
            allowed = allowed + self.scale_rtol * float(magnitude.max())
        return allowed


EXACT = Tolerance()
"""The tolerance of every op declared without one."""


Check = Callable[..., "str | None"]
"""A declared check: the library function's parameters in, the reason a call is not supported
(or ``None``). It looks at argument values and array metadata only, never computes."""


@dataclass(frozen=True)
class Quirks:
    """What an op declares about itself, next to its backend.

    Attributes:
        check: the op's own domain check (same parameters as the library function): the reason
            a call is outside what the backend reproduces, or ``None``. Runs before the backend.
        dtypes: dtype names (``uint8``) the data arguments (images, signals, arrays) may have,
            or PIL modes of PIL images; ``None``: whatever the library's adapter converts.
        channels: channel counts accepted for images ((H, W) and (H, W, 1) count as 1).
        empty: whether empty data arguments (a zero-sized axis) are accepted.
        buffers: parameters that make the library write into a caller's buffer (``dst``,
            ``out``): a call passing one (not ``None``) runs the original.
        inplace: positions of arguments the library modifies in place (``shuffle``): the
            backend's result is copied back into the caller's array.
        order: layout of returned arrays: ``C``, ``F``, ``A`` (Fortran order after a
            Fortran-ordered first array, else C) or ``K`` (the backend's strides);
            ``ufunc``: NumPy's order K, laid out after the call's array arguments as a ufunc
            lays out its result (a permutation of C order, whatever the backend returns);
            ``None``: the adapter's default.
        per_sample: parameters that may differ per sample of a batch, with their batched form
            (``{"M": "[N,2,3]"}``): a batched executor stacks them; the others group samples.
        random: the result depends on a random stream, not only on the arguments.
        tolerance: how close the backend comes to the library (``None``: bit-exact).
        differs: why the backend differs from the library beyond any tolerance (``""``: it
            does not); :attr:`fidelity` follows from this and ``tolerance``.
        reproduces: the parameters and modes the backend reproduces, in words (the op tables
            of the documentation).
        notes: what the declaration leaves to the library, for documentation.
    """

    check: Check | None = None
    dtypes: frozenset[str] | None = None
    channels: tuple[int, ...] | None = None
    empty: bool = False
    buffers: tuple[str, ...] = ("dst", "out")
    inplace: tuple[int, ...] = ()
    order: str | None = None
    per_sample: Mapping[str, str] = field(default_factory=dict)
    random: bool = False
    tolerance: Tolerance | None = None
    differs: str = ""
    reproduces: str = ""
    notes: str = ""

    @property
    def fidelity(self) -> Fidelity:
        """``DIFFERS`` when declared to differ, ``TOLERANCE`` with a tolerance that allows a
        difference, ``EXACT`` otherwise."""
        if self.differs:
            return Fidelity.DIFFERS
        if self.tolerance is not None and not self.tolerance.exact:
            return Fidelity.TOLERANCE
        return Fidelity.EXACT


class Adapter(Protocol):
    """Converts one library's values to backend values and back (one adapter per library).

    ``refuse`` checks the data arguments against the declared domain (dtypes, channels, empty,
    types the library takes); ``to_backend`` converts the arguments (arrays to device tensors,
    images to batches of one); ``to_library`` turns the backend's result into what the library
    returns (arrays of the declared layout, scalars of the library's kind, PIL images).

    An adapter may also define ``fast_path(spec) -> FastPath | None``: a single-pass conversion
    of an op's common calls, built once per op. It returns what ``refuse``, ``to_backend`` and
    ``to_library`` together return for every call it takes, and :data:`NOT_TAKEN` before
    converting anything for the others. The executor uses it only on devices that share memory
    with the host, for calls passing no output buffer, after the op's own check accepted them.
    """

    library: str
    default_strategy: Strategy

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """(position, name) of the data parameters of ``spec``'s backend."""
        ...

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Why this call's data arguments are outside the declared domain, or ``None``."""
        ...

    def to_backend(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        converter: ValueConverter,
        call: CallValues,
    ) -> tuple[list[Any], dict[str, Any], Any]:
        """Backend arguments and a state for ``to_library`` (whether a batch axis was added)."""
        ...

    def to_library(
        self,
        spec: OpSpec,
        result: object,
        converter: ValueConverter,
        call: CallValues,
        state: object,
    ) -> Any:
        """The backend's result as the library returns it."""
        ...


@dataclass(frozen=True)
class OpSpec:
    """How one library function is migrated: its backend, adapter and declared quirks.

    Attributes:
        name: canonical qualified name (``cv2.resize``).
        strategy: :class:`Strategy`.
        backend: for MoveOnly/StandardOp the torch callable; for FactoryOp the factory
            ``factory(**config, device=...) -> transform`` with ``transform(*data) -> result``.
            ``None`` for MoveOnly means "call the original function itself with moved inputs".
        adapter: the library's :class:`Adapter` (``None``: arrays in and out, as NumPy).
        quirks: the declared :class:`Quirks`.
        value_maps: ``{param: {library value: backend value}}`` applied to keyword arguments and
            positional ones named through ``positional_names``.
        renames: ``{library kwarg: backend kwarg}``.
        inject_kwargs: keyword arguments added to every backend call (``DEVICE``: the device).
        positional_names: names of the positional parameters of the library function.
        data_params: FactoryOp: names of the arguments passed to the transform; the others
            (hashable) form the configuration the transform is cached by.
        config_key: FactoryOp: ``config -> hashable key`` of the transform cache.
        family: the module of the ops package that declares it (``filter``), for documentation.
    """

    name: str
    strategy: Strategy
    backend: Callable[..., Any] | None = None
    adapter: Adapter | None = None
    quirks: Quirks = field(default_factory=Quirks)
    value_maps: Mapping[str, Mapping[Any, Any]] = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)
    inject_kwargs: Mapping[str, Any] = field(default_factory=dict)
    positional_names: tuple[str, ...] = ()
    data_params: tuple[str, ...] = ()
    config_key: Callable[[dict[str, Any]], Any] | None = None
    family: str = ""

    @property
    def inplace_args(self) -> tuple[int, ...]:
        """Positions of the arguments the library modifies in place (``quirks.inplace``)."""
        return self.quirks.inplace

    @property
    def library(self) -> str:
        """The adapter's library name (``cv2``, ``numpy``, ``pil``, ``audio``, ``torch``)."""
        return self.adapter.library if self.adapter is not None else "numpy"


def parameters(func: Callable[..., Any]) -> tuple[tuple[str, ...], bool]:
    """Names of ``func``'s positional parameters, and whether it takes a keyword-only ``device``."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return (), False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = tuple(p.name for p in params if p.kind in kinds)
    takes_device = any(p.name == "device" and p.kind is p.KEYWORD_ONLY for p in params)
    return positional, takes_device


def declare(
    name: str,
    backend: Callable[..., Any] | None,
    adapter: Adapter,
    *,
    strategy: Strategy | None = None,
    positional_names: tuple[str, ...] | None = None,
    data_params: tuple[str, ...] = (),
    config_key: Callable[[dict[str, Any]], Any] | None = None,
    tolerance: Tolerance | None = None,
    **quirks: Any,
) -> OpSpec:
    """The spec of a backend with the library's parameters, declared with its quirks.

    A backend taking a keyword-only ``device`` gets the call's device injected (a FactoryOp's
    factory always gets it).

    Args:
        name: canonical name of the library function.
        backend: the torch implementation (the library's parameter names and order), or the
            factory of a FactoryOp.
        adapter: the library's adapter.
        strategy: default: the adapter's.
        positional_names: the library's positional parameters (default: the backend's).
        data_params: FactoryOp: the arguments passed to the transform.
        config_key: FactoryOp: the cache key of a configuration.
        tolerance: how close the backend comes to the library; absent: bit-exact. The op's
            fidelity follows from it (:attr:`Quirks.fidelity`).
        **quirks: the other fields of :class:`Quirks`.
    """
    positional, takes_device = parameters(backend) if backend is not None else ((), False)
    strategy = strategy or adapter.default_strategy
    inject = {"device": DEVICE} if takes_device and strategy is not Strategy.FACTORY_OP else {}
    return OpSpec(
        name,
        strategy,
        backend,
        adapter,
        Quirks(tolerance=tolerance, **quirks),
        inject_kwargs=inject,
        positional_names=positional if positional_names is None else positional_names,
        data_params=data_params,
        config_key=config_key,
    )


@dataclass(frozen=True)
class Library:
    """One ``codedag.backends.ops.<library>`` package: its facts, adapter and the specs of its ops.

    Attributes:
        facts: the package's plain facts (``facts.py``: modules, namespaces, non-migratable
            functions, distributions, ...).
        adapter: the library's adapter.
        specs: one spec per op, under the name it was declared with (the registry resolves it
            to the canonical name of the function object).
        op: the package's declaration helper, ``op(name, backend) -> OpSpec``, for backends
            declared with default quirks (``None``: the adapter's, empty arrays accepted).
    """

    facts: LibraryFacts
    adapter: Adapter
    specs: tuple[OpSpec, ...]
    op: Callable[[str, Callable[..., Any]], OpSpec] | None = None

    @property
    def name(self) -> str:
        """The package name (``cv2``)."""
        return self.facts.name

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Modules whose public names are searched for aliases of each function."""
        return self.facts.namespaces

    @property
    def non_migratable(self) -> Mapping[str, str]:
        """Names of this library that must stay on the CPU, with the reason."""
        return self.facts.non_migratable

    def backends(self) -> dict[str, Callable[..., Any]]:
        """``{declared name: backend}`` of every op with a backend."""
        return {s.name: s.backend for s in self.specs if s.backend is not None}

    def declare_backend(self, name: str, backend: Callable[..., Any]) -> OpSpec:
        """The spec of ``backend`` for ``name`` with the library's default quirks."""
        if self.op is not None:
            return self.op(name, backend)
        return declare(name, backend, self.adapter, empty=True)


def collect_specs(package: str, path: Any) -> tuple[OpSpec, ...]:
    """The ``OPS`` of every module of an ops package (modules not starting with ``_``), each
    spec's ``family`` set to its module's name.

    Adding an op to a library is adding a module with its backend and ``OPS`` declaration.
    """
    import importlib
    import pkgutil
    from dataclasses import replace

    specs: list[OpSpec] = []
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        specs.extend(replace(spec, family=info.name) for spec in getattr(module, "OPS", ()))
    return tuple(specs)
