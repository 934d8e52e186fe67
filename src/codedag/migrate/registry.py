"""The registry of migratable functions: one :class:`OpSpec` per canonical name.

Specs come from three places, later ones overriding earlier ones:

1. built-in ``MoveOnly`` specs for torch functions that user code calls on CPU tensors
   (``torch.nn.functional.interpolate``, ``torch.stft``, ...): the same function runs on the
   device, only the inputs move;
2. the ``BACKENDS`` of every ``codedag.migrate.ops.<library>`` module that imports (each imported
   on its own, so the registry works with whichever backends exist): image and audio backends are
   batch-first and get a ``StandardOp`` that adds and removes the batch axis; NumPy backends take
   the arrays as they are and get a ``MoveOnly``; a module may add ``SPECS`` (full OpSpecs);
3. :meth:`Registry.register` (tests, extensions).

:data:`NON_MIGRATABLE` names what must stay on the CPU whatever a plan says (file and network
I/O, decoders, functions returning views of their input), each with the reason.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import logging
import pkgutil
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from codedag.migrate.tolerances import TOLERANCES

log = logging.getLogger(__name__)


class _Device:
    def __repr__(self) -> str:
        return "DEVICE"


DEVICE: Any = _Device()
"""Value of an ``OpSpec.inject_kwargs`` entry that the wrapper replaces by the call's device."""

# In-place library functions: positional indices of the arguments they modify.
INPLACE_ARGS: dict[str, tuple[int, ...]] = {"numpy.random.shuffle": (0,)}


class Strategy(str, enum.Enum):
    """How the wrapper turns a library call into a backend call (seed 001 §4.2)."""

    MOVE_ONLY = "MoveOnly"
    """Move array inputs to the device and call the backend with the same arguments."""
    STANDARD_OP = "StandardOp"
    """Adapt the arguments (batch axis, value maps, renames, injected kwargs) then call."""
    FACTORY_OP = "FactoryOp"
    """Build (once per configuration) a transform from the configuration arguments, apply it."""


# Convenience aliases matching the seed's names.
MoveOnly = Strategy.MOVE_ONLY
StandardOp = Strategy.STANDARD_OP
FactoryOp = Strategy.FACTORY_OP

# Parameter names that hold images in cv2/PIL signatures (batch-first backends get N=1 there).
IMAGE_PARAMS: frozenset[str] = frozenset({"src", "src1", "src2", "image", "img", "im", "self"})
AUDIO_PARAMS: frozenset[str] = frozenset({"y", "S"})


@dataclass(frozen=True)
class BatchAxis:
    """Which arguments get a leading batch axis of size 1 (and outputs lose it).

    Attributes:
        params: parameter names (matched by keyword, and by position through ``positions``).
        positions: positional indices of those parameters in the library's signature.
        ndims: only arrays with one of these ranks are batched (an image is HxW or HxWxC).
    """

    params: frozenset[str]
    positions: tuple[int, ...]
    ndims: tuple[int, ...]


@dataclass(frozen=True)
class OpSpec:
    """How one library function is migrated.

    Attributes:
        name: canonical qualified name (``cv2.resize``).
        strategy: :class:`Strategy`.
        backend: for MoveOnly/StandardOp the torch callable; for FactoryOp the factory
            ``factory(**config) -> transform`` where ``transform(*data) -> result``. ``None``
            for MoveOnly means "call the original function itself with moved inputs".
        library: ``cv2``, ``numpy``, ``pil``, ``audio`` or ``torch``: decides how outputs are
            converted back (numpy scalars, python floats, PIL images, CPU tensors).
        batch: batch-axis rule for batch-first backends, or ``None``.
        value_maps: ``{param: {library value: backend value}}`` applied to keyword arguments and
            positional ones named through ``positional_names``.
        renames: ``{library kwarg: backend kwarg}``.
        inject_kwargs: keyword arguments added to every backend call (``device`` is filled in).
        positional_names: parameter names of positional arguments, for value maps and FactoryOp.
        data_params: FactoryOp: names of the arguments passed to the transform; the other
            arguments (hashable) form the configuration the transform is cached by.
        output_order: ``C`` (C-contiguous), ``F`` (Fortran) or ``K`` (keep the backend's strides)
            for arrays returned to user code: the layout the library itself returns.
        unsupported_kwargs: keyword arguments whose non-``None`` value means "the library writes
            into a user buffer" (``dst``, ``out``): such calls run the original.
        pil_mode_param: PIL functions whose output mode is an argument (``Image.convert``).
        inplace_args: positions of arguments the library modifies in place
            (``numpy.random.shuffle``): the result is copied back into the caller's array.
        config_key: FactoryOp: ``config -> hashable key`` of the transform cache (default: the
            configuration values themselves).
        pil_batch: PIL images reach the backend as ``ops.pil.PILBatch`` (tensor + mode) and
            ``PILBatch`` results come back as PIL images (the convention of the PIL backends).
    """

    name: str
    strategy: Strategy
    backend: Callable[..., Any] | None = None
    library: str = "numpy"
    batch: BatchAxis | None = None
    value_maps: Mapping[str, Mapping[Any, Any]] = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)
    inject_kwargs: Mapping[str, Any] = field(default_factory=dict)
    positional_names: tuple[str, ...] = ()
    data_params: tuple[str, ...] = ()
    output_order: str = "K"
    unsupported_kwargs: tuple[str, ...] = ("dst", "out")
    pil_mode_param: str | None = None
    inplace_args: tuple[int, ...] = ()
    config_key: Callable[[dict[str, Any]], Any] | None = None
    pil_batch: bool = False


# Functions that must stay on the CPU whatever a plan says, with the reason.
NON_MIGRATABLE: dict[str, str] = {
    **{
        name: "file or network I/O"
        for name in (
            "cv2.imread",
            "cv2.imwrite",
            "cv2.imreadmulti",
            "cv2.VideoCapture",
            "PIL.Image.open",
            "PIL.Image.Image.save",
            "numpy.load",
            "numpy.save",
            "numpy.savez",
            "numpy.loadtxt",
            "numpy.fromfile",
            "numpy.genfromtxt",
            "librosa.load",
            "librosa.stream",
            "builtins.open",
            "io.open",
            "os.system",
            "subprocess.run",
            "subprocess.Popen",
            "urllib.request.urlopen",
            "torch.load",
            "torch.save",
        )
    },
    **{
        name: "decoder or encoder of a compressed format (CPU library code)"
        for name in (
            "cv2.imdecode",
            "cv2.imencode",
            "PIL.Image.frombytes",
            "PIL.Image.Image.tobytes",
        )
    },
    **{
        name: "returns a view of its input: O(1) on the CPU, and a copy would break aliasing"
        for name in (
            "numpy.transpose",
            "numpy.swapaxes",
            "numpy.moveaxis",
            "numpy.flip",
            "numpy.fliplr",
            "numpy.flipud",
            "numpy.rot90",
            "numpy.reshape",
            "numpy.squeeze",
            "numpy.expand_dims",
            "numpy.ravel",
            "numpy.broadcast_to",
            "numpy.asarray",
            "numpy.ascontiguousarray",
        )
    },
    **{
        name: "draws from NumPy's global random state: a device RNG gives other numbers"
        for name in ("numpy.random.seed", "numpy.random.get_state", "numpy.random.set_state")
    },
}

# Torch functions user code calls on CPU tensors; MoveOnly runs them on the device as they are.
TORCH_MOVE_ONLY: tuple[str, ...] = (
    "torch.nn.functional.interpolate",
    "torch.conv1d",
    "torch.conv2d",
    "torch.avg_pool1d",
    "torch.nn.functional.avg_pool2d",
    "torch.nn.functional.grid_sample",
    "torch.nn.functional.pad",
    "torch.functional.stft",
    "torch.matmul",
    "torch.fft.fft",
    "torch.fft.rfft",
    "torch.fft.fft2",
    "torch.fft.rfft2",
)


def _library_of(name: str, module: str) -> str:
    for prefix, library in (("PIL.", "pil"), ("librosa.", "audio"), ("cv2.", "cv2")):
        if name.startswith(prefix):
            return library
    if name.startswith("torch."):
        return "torch"
    for prefix in ("cv2", "pil", "audio"):
        if module.startswith(prefix):
            return prefix
    return "numpy"


def _parameters(func: Callable[..., Any]) -> tuple[tuple[str, ...], bool]:
    """Names of the positional parameters, and whether there is a ``device`` keyword."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return (), False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = tuple(p.name for p in params if p.kind in kinds)
    takes_device = any(p.name == "device" and p.kind is p.KEYWORD_ONLY for p in params)
    return positional, takes_device


def spec_from_backend(name: str, backend: Callable[..., Any], module: str = "") -> OpSpec:
    """The spec of a contract backend (``ops/__init__.py``): batch-first for images and audio.

    Args:
        name: canonical name of the library function.
        backend: the torch implementation with the library's parameters.
        module: the ops module it came from (``cv2``, ``numpy``, ``pil``, ``audio``).
    """
    library = _library_of(name, module)
    positional, takes_device = _parameters(backend)
    inject = {"device": DEVICE} if takes_device else {}
    if library in ("cv2", "pil"):
        params, ndims = IMAGE_PARAMS, (2, 3)
    elif library == "audio":  # every signal and spectrogram of a call is one sample
        params, ndims = AUDIO_PARAMS, (1, 2, 3, 4)
    elif inject:  # NumPy draws without array arguments: run on the call's device
        return OpSpec(
            name,
            Strategy.STANDARD_OP,
            backend,
            library,
            inject_kwargs=inject,
            positional_names=positional,
            inplace_args=INPLACE_ARGS.get(name, ()),
        )
    else:
        return OpSpec(
            name,
            Strategy.MOVE_ONLY,
            backend,
            library,
            positional_names=positional,
            inplace_args=INPLACE_ARGS.get(name, ()),
        )
    positions = tuple(i for i, p in enumerate(positional) if p in params) or (
        (0,) if library != "audio" else ()
    )
    batch = BatchAxis(frozenset(params), positions, ndims)
    order = "K" if library == "audio" else "C"
    if name == "librosa.stft":
        order = "F"
    pil_mode = "mode" if name == "PIL.Image.Image.convert" else None
    pil_batch = library == "pil" and module.startswith("pil")
    return OpSpec(
        name,
        Strategy.STANDARD_OP,
        backend,
        library,
        batch=batch,
        positional_names=positional,
        inject_kwargs=inject,
        output_order=order,
        pil_mode_param=pil_mode,
        pil_batch=pil_batch,
    )


class Registry:
    """Specs by canonical name, plus the NonMigratable list; thread-safe.

    Backends are registered under the names their modules chose (``numpy.absolute``,
    ``librosa.feature.melspectrogram``); the tracer names a call after the function *object*
    (:func:`codedag.trace.names.canonical_name`: ``numpy.abs`` for ``np.absolute`` in NumPy 2,
    ``librosa.feature.spectral.melspectrogram``). The registry therefore also answers under each
    object's canonical name: the first lookup of a library's name resolves that library's
    registered names (importing it) and adds the canonical ones.
    """

    def __init__(self, specs: Mapping[str, OpSpec] | None = None) -> None:
        self._lock = threading.RLock()
        self._specs: dict[str, OpSpec] = dict(specs or {})
        self.non_migratable: dict[str, str] = dict(NON_MIGRATABLE)
        self.load_errors: dict[str, str] = {}
        self._canonical_done: set[str] = set()
        self._aliases: dict[str, set[str]] = {}
        self._canonical_specs: dict[str, OpSpec] = {}

    def register(self, spec: OpSpec) -> None:
        """Add or replace a spec; refused for NonMigratable names."""
        from codedag.errors import MigrationError

        if spec.name in self.non_migratable:
            raise MigrationError(
                f"{spec.name!r} cannot be registered: {self.non_migratable[spec.name]}"
            )
        with self._lock:
            self._specs[spec.name] = spec
            self._canonical_specs.pop(spec.name, None)
            self._canonical_done.discard(spec.name.split(".", 1)[0])

    def unregister(self, name: str) -> None:
        """Remove a spec (no error when absent)."""
        with self._lock:
            self._specs.pop(name, None)

    def _canonicalize(self, top: str) -> None:
        """Add the canonical names of every registered name of the library ``top``."""
        with self._lock:
            if top in self._canonical_done:
                return
            self._canonical_done.add(top)
            from codedag.patching import resolve
            from codedag.trace.names import canonical_name

            for name, spec in list(self._specs.items()):
                if name.split(".", 1)[0] != top:
                    continue
                try:
                    _owner, _attr, raw = resolve(name)
                except Exception as e:  # library missing or name absent in this version
                    log.debug("cannot resolve %s: %s", name, e)
                    continue
                obj = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
                canonical = canonical_name(obj)
                if canonical in self.non_migratable and name != canonical:
                    # the same function object under another public name (numpy.permute_dims
                    # is numpy.transpose): NonMigratable under every name
                    self.non_migratable[name] = self.non_migratable[canonical]
                    continue
                self._aliases.setdefault(canonical, set()).update({canonical, name})
                if canonical not in self._specs and canonical not in self.non_migratable:
                    self._canonical_specs[canonical] = replace(spec, name=canonical)
                    if name in TOLERANCES:  # the same function: the same tolerance
                        TOLERANCES.setdefault(canonical, TOLERANCES[name])

    def _lookup(self, name: str) -> OpSpec | None:
        spec = self._specs.get(name) or self._canonical_specs.get(name)
        if spec is None:
            top = name.split(".", 1)[0]
            if top not in self._canonical_done and any(
                n.split(".", 1)[0] == top for n in self._specs
            ):
                self._canonicalize(top)
                spec = self._canonical_specs.get(name)
        return spec

    def get(self, name: str) -> OpSpec | None:
        """The spec of ``name``, or ``None`` when unknown or NonMigratable."""
        if name in self.non_migratable:
            return None
        return self._lookup(name)

    def is_migratable(self, name: str) -> bool:
        """Whether a plan may place ``name`` on a device."""
        return name not in self.non_migratable and self._lookup(name) is not None

    def aliases(self, name: str) -> set[str]:
        """Registered names of the same function object as ``name`` (``name`` included)."""
        self._lookup(name)
        return set(self._aliases.get(name, ())) | {name}

    def names(self) -> list[str]:
        """Every migratable name as registered (canonical spellings resolve through lookups).

        Aliases of NonMigratable functions (``numpy.permute_dims`` is ``numpy.transpose``) are
        left out: canonicalizing each library first finds them.
        """
        for top in sorted({n.split(".", 1)[0] for n in self._specs}):
            self._canonicalize(top)
        return sorted(n for n in self._specs if n not in self.non_migratable)

    def by_strategy(self) -> dict[str, list[str]]:
        """``{strategy value: [names]}`` with every strategy present (possibly empty)."""
        out: dict[str, list[str]] = {s.value: [] for s in Strategy}
        for name in self.names():
            out[self._specs[name].strategy.value].append(name)
        return out


def _immutable_owner(name: str) -> bool:
    """Whether ``name`` is an attribute of a C type that cannot be set (``numpy.ndarray.sum``).

    Checked only for libraries already imported (the ops modules import NumPy and torch).
    """
    parts = name.split(".")
    if len(parts) < 3 or parts[0] not in sys.modules:
        return False
    owner: Any = sys.modules.get(".".join(parts[:-2]))
    if owner is None:
        return False
    owner = getattr(owner, parts[-2], None)
    return isinstance(owner, type) and bool(owner.__flags__ & (1 << 8))  # Py_TPFLAGS_IMMUTABLETYPE


def ops_modules() -> list[str]:
    """Backend modules in ``codedag.migrate.ops`` (files not starting with ``_``)."""
    from codedag.migrate import ops

    return sorted(m.name for m in pkgutil.iter_modules(ops.__path__) if not m.name.startswith("_"))


def _load_ops_module(registry: Registry, module: str) -> None:
    try:
        mod = importlib.import_module(f"codedag.migrate.ops.{module}")
    except Exception as e:  # absent library or a broken module: the others still load
        registry.load_errors[module] = f"{type(e).__name__}: {e}"
        log.warning("backend module %s not loaded: %s", module, e)
        return
    for name, backend in getattr(mod, "BACKENDS", {}).items():
        if name in registry.non_migratable:
            continue
        if _immutable_owner(name):
            registry.non_migratable[name] = "a method of a C type, whose attributes cannot be set"
            continue
        registry._specs[name] = spec_from_backend(name, backend, module)
    for name, spec in getattr(mod, "SPECS", {}).items():
        if name not in registry.non_migratable:
            registry._specs[name] = spec


def build_default_registry() -> Registry:
    """Build the registry from the built-in specs and every importable ops module."""
    registry = Registry()
    from codedag.migrate.factories import builtin_factory_specs

    for name in TORCH_MOVE_ONLY:
        registry._specs[name] = OpSpec(name, Strategy.MOVE_ONLY, None, "torch")
    for module in ops_modules():
        _load_ops_module(registry, module)
    registry._specs.update(builtin_factory_specs())
    for top in ("numpy", "torch"):  # imported already by the backends: cheap to resolve now
        registry._canonicalize(top)
    return registry


_DEFAULT: Registry | None = None
_DEFAULT_LOCK = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry, built on first use (imports torch and the ops modules)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = build_default_registry()
    return _DEFAULT


def list_supported_functions() -> dict[str, list[str]]:
    """Migratable functions by strategy: ``{"MoveOnly": [...], "StandardOp": [...], ...}``."""
    return default_registry().by_strategy()


def is_migratable(name: str) -> bool:
    """Whether the canonical name ``name`` can run through a torch backend.

    The optimizer calls this to decide placement; NonMigratable names (I/O, decoders, views)
    and names without a backend return ``False``.
    """
    return default_registry().is_migratable(name)


# Prefixes of functions whose result is not a function of their arguments: a backend draws from
# another random stream, so the data changes. Placed only when the user names them.
RANDOM_PREFIXES: tuple[str, ...] = ("numpy.random.", "random.", "torch.rand", "torch.normal")

# Functions whose backend differs from the library beyond the tolerance table, with the reason.
# Placed only when the user names them.
DIFFERS_FROM_LIBRARY: dict[str, str] = {}


def placement_blocker(name: str) -> str | None:
    """Why a plan must not place ``name`` unless the user opts in by name, or ``None``.

    Blocked: functions whose result is not a function of their arguments (random draws) and
    functions whose backend is declared to differ from the library beyond the tolerance table.
    """
    if name.startswith(RANDOM_PREFIXES):
        return "draws random numbers: a backend draws from another stream and the data changes"
    return DIFFERS_FROM_LIBRARY.get(name)


def non_migratable_reason(name: str) -> str | None:
    """Why ``name`` must stay on the CPU, or ``None`` when it is not on the NonMigratable list."""
    return NON_MIGRATABLE.get(name)
