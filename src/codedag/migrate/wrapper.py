"""UniversalWrapper: decides per call whether to run the torch backend or the original.

The replacement installed for a function is a plain Python function (so it binds as a method when
installed on a class such as ``PIL.Image.Image``). Its hot path:

* inside a migrated call (a backend or the value conversion calling patched code): the original,
  with no bookkeeping;
* a function whose planned calls all share one placement: straight to the backend, no stack walk;
* otherwise the enclosing frames are matched against the plan (:mod:`codedag.migrate.context`);
  unplanned calls pass through to the original.

Any exception of the migrated path (``UnsupportedOperation`` included) runs the original instead;
the first reason per function is logged as a warning, every reason is counted in
:meth:`UniversalWrapper.stats`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.context import _CODE_NAMES, ContextMatcher, Placement, frame_name
from codedag.migrate.devices import effective_device
from codedag.migrate.registry import DEVICE, OpSpec, Strategy
from codedag.migrate.values import CallValues, ValueConverter, numpy_scalar

log = logging.getLogger(__name__)

_MAX_REASONS = 20
_STACK_CACHE_SIZE = 4096
GIVE_UP_AFTER = 16
"""Consecutive fallbacks at one call site (code object) after which the original runs there."""
_FACTORY_CACHE_SIZE = 64


class _State(threading.local):
    def __init__(self) -> None:
        self.counters: dict[str, list[Any]] = {}


_STATE = _State()

# Threads inside a migrated call (backend or value conversion running): patched functions called
# there run the original. A set checked for emptiness first keeps the common path to one test.
_BUSY: set[int] = set()


def _count(counter: itertools.count[int]) -> int:
    """Current value of an ``itertools.count`` without advancing it."""
    return int(counter.__reduce__()[1][0])


class _UfuncProxy:
    """A NumPy ufunc's replacement: calls go to the wrapper, ``reduce``/``outer``/... to the ufunc.

    Each proxy has its own subclass whose ``__call__`` *is* the replacement function (a
    staticmethod), so no extra Python frame sits between the caller and the replacement.
    """

    def __init__(self, ufunc: Any, wrapper: Any) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__doc__ = ufunc.__doc__
        self.__codedag_wrapper__ = wrapper

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._ufunc, name)

    def __repr__(self) -> str:
        return f"<codedag wrapper of {self._ufunc!r}>"


def _ufunc_proxy(replacement: Callable[..., Any], ufunc: Any, wrapper: Any) -> _UfuncProxy:
    cls = type(f"codedag_{ufunc.__name__}", (_UfuncProxy,), {"__call__": staticmethod(replacement)})
    return cls(ufunc, wrapper)


class UniversalWrapper:
    """Runs one library function through its torch backend where the plan places it.

    Args:
        spec: the registry's spec of the function.
        original: the function being replaced.
        matcher: the plan's placements of this function (devices already mapped to this host).
        converters: one :class:`ValueConverter` per device, shared by all wrappers of a migrator
            so that a value returned by one migrated call is reused by the next.
    """

    def __init__(
        self,
        spec: OpSpec,
        original: Callable[..., Any],
        matcher: ContextMatcher,
        converters: Mapping[str, ValueConverter],
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.original = original
        self.matcher = matcher
        self.converters = converters
        self._passed = itertools.count()
        self._nested = itertools.count()
        self._fell_back = itertools.count()
        self._reasons: Counter[str] = Counter()
        self._placements: dict[tuple[str, str], itertools.count[int]] = {}
        self._lock = threading.Lock()
        self._warned = False
        self._factories: OrderedDict[Any, Any] = OrderedDict()
        self._factory = spec.strategy is Strategy.FACTORY_OP
        self._adapting = bool(spec.value_maps or spec.renames or spec.inject_kwargs)
        # Enough frames for the plan's enclosing names plus frames the tracer filtered out.
        self._walk_depth = min(64, 4 * matcher.depth + 4)
        self._by_code: dict[Any, tuple[Placement, str]] = {}
        self._by_stack: dict[tuple[int, ...], tuple[Placement, str]] = {}
        self._failures: dict[Any, int] = {}
        self._given_up: set[Any] = set()
        self._keep_alive: list[tuple[Any, ...]] = []
        self.function = self._build()

    # -- the replacement ---------------------------------------------------------------------
    def _build(self) -> Callable[..., Any]:
        original = self.original
        run = self._run
        nested = self._nested
        busy = _BUSY
        get_ident = threading.get_ident
        passed = self._passed
        getframe = sys._getframe
        given_up = self._given_up
        if self.matcher.constant:
            device = self.matcher.default

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    next(nested)
                    return original(*args, **kwargs)
                if given_up and getframe(1).f_code in given_up:
                    next(passed)
                    return original(*args, **kwargs)
                return run(args, kwargs, device, "name")

        else:
            decide = self._decide
            by_code = self._by_code.get

            def replacement(*args: Any, **kwargs: Any) -> Any:
                if busy and get_ident() in busy:
                    next(nested)
                    return original(*args, **kwargs)
                decision = by_code(getframe(1).f_code)
                if decision is None:
                    decision = decide()
                if decision[0] is None:
                    next(passed)
                    return original(*args, **kwargs)
                return run(args, kwargs, decision[0], decision[1])

        with contextlib.suppress(AttributeError, TypeError):
            functools.update_wrapper(replacement, original)
        replacement.__codedag_wrapper__ = self  # type: ignore[attr-defined]
        if type(original).__name__ == "ufunc":
            return _ufunc_proxy(replacement, original, self)  # type: ignore[return-value]
        return replacement

    def _decide(self) -> tuple[Placement, str]:
        """Match the enclosing frames against the plan (the placement's slow path).

        Placements that do not depend on the call's own counter are cached by the identities of
        the enclosing code objects (kept alive by the cache, so an id is never reused).
        """
        # Frames: 0 _decide, 1 replacement, 2 the caller.
        caller = sys._getframe(2)
        frame: Any = caller
        codes = []
        for _ in range(self._walk_depth):
            if frame is None:
                break
            codes.append(frame.f_code)
            frame = frame.f_back
        stack_key = tuple(map(id, codes))
        cached = self._by_stack.get(stack_key)
        if cached is not None:
            return cached
        names = _CODE_NAMES
        parents = tuple(names.get(f.f_code) or frame_name(f) for f in _frames(caller, len(codes)))[
            ::-1
        ]
        counters = _STATE.counters
        slot = counters.get(self.name)
        if slot is not None and slot[0] is caller:
            slot[1] += 1
            index = slot[1]
        else:
            counters[self.name] = [caller, 0]
            index = 0
        placement, level, independent = self.matcher.match_detail(parents, index)
        decision = (placement, level)
        if independent:
            if parents and self.matcher.decided_by_caller(parents[-1]):
                self._by_code[caller.f_code] = decision
            elif len(self._by_stack) < _STACK_CACHE_SIZE:
                self._by_stack[stack_key] = decision
                self._keep_alive.append(tuple(codes))
        return decision

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: Any, level: str) -> Any:
        if device is None:
            next(self._passed)
            return self.original(*args, **kwargs)
        ident = threading.get_ident()
        _BUSY.add(ident)
        try:
            used = device if device == "cpu" else effective_device(device)
            result = self._execute(args, kwargs, used)
        except Exception as error:
            _BUSY.discard(ident)
            self._record_fallback(error)
            # Frames: 0 _run, 1 replacement, 2 the caller.
            self._note_failure(sys._getframe(2).f_code)
            return self.original(*args, **kwargs)
        finally:
            _BUSY.discard(ident)
        if self._failures:
            self._failures.pop(sys._getframe(2).f_code, None)
        counter = self._placements.get((level, used))
        if counter is None:
            with self._lock:
                counter = self._placements.setdefault((level, used), itertools.count())
        next(counter)
        return result

    def _note_failure(self, code: Any) -> None:
        """After GIVE_UP_AFTER fallbacks in a row at one call site, stop trying there."""
        count = self._failures.get(code, 0) + 1
        self._failures[code] = count
        if count >= GIVE_UP_AFTER:
            self._failures.pop(code, None)
            self._given_up.add(code)
            self._by_code[code] = (None, "given up")
            log.info(
                "%s: %d fallbacks in a row at %s:%d; running the original there from now on",
                self.name,
                count,
                code.co_filename,
                code.co_firstlineno,
            )

    def _record_fallback(self, error: Exception) -> None:
        next(self._fell_back)
        reason = f"{type(error).__name__}: {error}"[:200]
        with self._lock:
            if reason in self._reasons or len(self._reasons) < _MAX_REASONS:
                self._reasons[reason] += 1
            else:
                self._reasons["(other reasons)"] += 1
            first = not self._warned
            self._warned = True
        if first:
            level = logging.INFO if isinstance(error, UnsupportedOperation) else logging.WARNING
            log.log(level, "%s: running the original (%s)", self.name, reason)

    # -- the migrated path -------------------------------------------------------------------
    def _execute(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        spec = self.spec
        if kwargs:
            for name in spec.unsupported_kwargs:
                if name in kwargs:
                    if kwargs[name] is not None:
                        raise UnsupportedOperation(f"{name}= writes into a caller's buffer")
                    kwargs = {k: v for k, v in kwargs.items() if k != name}
        converter = self.converters.get(device)
        if converter is None:
            converter = self.converters[device] = ValueConverter(device)  # type: ignore[index]
        call = CallValues()
        try:
            if self._factory:
                result, batched = self._factory_call(args, kwargs, converter, call, device)
            else:
                new_args, new_kwargs, batched = self._convert_inputs(args, kwargs, converter, call)
                if self._adapting:
                    new_args, new_kwargs = self._adapt(new_args, new_kwargs, device)
                backend = spec.backend if spec.backend is not None else self.original
                result = backend(*new_args, **new_kwargs)
                for index in spec.inplace_args:
                    _copy_back(args[index], new_args[index])
            return self._to_host(result, converter, call, batched, args, kwargs)
        finally:
            converter.finish(call)

    def _convert_inputs(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        converter: ValueConverter,
        call: CallValues,
    ) -> tuple[list[Any], dict[str, Any], bool]:
        batch = self.spec.batch
        to_device = converter.to_device
        if batch is None:  # MoveOnly: convert, nothing else
            return (
                [to_device(v, call) for v in args],
                {k: to_device(v, call) for k, v in kwargs.items()},
                False,
            )
        batched = False
        new_args = []
        for index, value in enumerate(args):
            converted = converter.to_device(value, call)
            if batch is not None and index in batch.positions:
                converted, did = _add_batch_axis(converted, batch.ndims)
                batched |= did
            new_args.append(converted)
        new_kwargs = {}
        for key, value in kwargs.items():
            converted = converter.to_device(value, call)
            if batch is not None and key in batch.params:
                converted, did = _add_batch_axis(converted, batch.ndims)
                batched |= did
            new_kwargs[key] = converted
        return new_args, new_kwargs, batched

    def _adapt(
        self, args: list[Any], kwargs: dict[str, Any], device: str
    ) -> tuple[list[Any], dict[str, Any]]:
        spec = self.spec
        if spec.value_maps:
            for index, value in enumerate(args):
                if index < len(spec.positional_names):
                    table = spec.value_maps.get(spec.positional_names[index])
                    if table is not None:
                        args[index] = _mapped(spec.name, spec.positional_names[index], table, value)
            for key, value in kwargs.items():
                table = spec.value_maps.get(key)
                if table is not None:
                    kwargs[key] = _mapped(spec.name, key, table, value)
        if spec.renames:
            kwargs = {spec.renames.get(k, k): v for k, v in kwargs.items()}
        for key, value in spec.inject_kwargs.items():
            kwargs[key] = torch.device(device) if value is DEVICE else value
        return args, kwargs

    def _factory_call(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        converter: ValueConverter,
        call: CallValues,
        device: str,
    ) -> tuple[Any, bool]:
        spec = self.spec
        names = spec.positional_names
        if len(args) > len(names):
            raise UnsupportedOperation(
                f"{len(args)} positional arguments; expected <= {len(names)}"
            )
        bound = dict(zip(names, args))
        bound.update(kwargs)
        data = {k: v for k, v in bound.items() if k in spec.data_params}
        config = {k: v for k, v in bound.items() if k not in spec.data_params}
        if spec.config_key is not None:
            key: Any = (device, spec.config_key(config))
        else:
            key = (device, *sorted((k, _hashable(v)) for k, v in config.items()))
        transform = self._factories.get(key)
        if transform is None:
            transform = spec.backend(**config, device=torch.device(device))  # type: ignore[misc]
            with self._lock:
                self._factories[key] = transform
                while len(self._factories) > _FACTORY_CACHE_SIZE:
                    self._factories.popitem(last=False)
        tensors = []
        batched = False
        for name in spec.data_params:
            if name not in data:
                continue
            value = converter.to_device(data[name], call)
            if spec.batch is not None:
                value, did = _add_batch_axis(value, spec.batch.ndims)
                batched |= did
            tensors.append(value)
        return transform(*tensors), batched

    def _to_host(
        self,
        result: Any,
        converter: ValueConverter,
        call: CallValues,
        batched: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        spec = self.spec
        if isinstance(result, torch.Tensor):
            if batched:
                if result.dim() == 0 or result.shape[0] != 1:
                    raise UnsupportedOperation(
                        f"backend returned shape {tuple(result.shape)} for a batch of one"
                    )
                result = result[0]
            if spec.library == "torch":
                return result.to(call.torch_device or "cpu")
            if spec.library == "pil" and call.pil_modes and result.dim() in (2, 3):
                return self._to_pil(result, converter, call, args, kwargs)
            array = converter.tensor_to_array(result, spec.output_order)
            if array.ndim == 0:
                return array.item() if spec.library == "cv2" else numpy_scalar(array)
            return array
        if isinstance(result, tuple | list):
            return type(result)(
                self._to_host(r, converter, call, batched, args, kwargs) for r in result
            )
        return result

    def _to_pil(
        self,
        result: torch.Tensor,
        converter: ValueConverter,
        call: CallValues,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        from PIL import Image

        mode = call.pil_modes[0]
        param = self.spec.pil_mode_param
        if param is not None:
            names = self.spec.positional_names
            position = names.index(param) if param in names else -1
            if param in kwargs:
                mode = kwargs[param]
            elif 0 <= position < len(args):
                mode = args[position]
        image = Image.fromarray(converter.tensor_to_array(result, "C"))
        if image.mode != mode:
            raise UnsupportedOperation(f"result has PIL mode {image.mode!r}, expected {mode!r}")
        return image

    # -- statistics --------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters of this function: migrated, fell back (with reasons), passed through."""
        levels: Counter[str] = Counter()
        devices: Counter[str] = Counter()
        with self._lock:
            for (level, device), counter in self._placements.items():
                count = _count(counter)
                levels[level] += count
                devices[device] += count
            return {
                "strategy": self.spec.strategy.value,
                "migrated": sum(levels.values()),
                "fell_back": _count(self._fell_back),
                "passed_through": _count(self._passed),
                "nested": _count(self._nested),
                "given_up_call_sites": len(self._given_up),
                "fallback_reasons": dict(self._reasons),
                "match_levels": dict(levels),
                "devices": dict(devices),
            }


def _frames(frame: Any, count: int) -> Any:
    for _ in range(count):
        yield frame
        frame = frame.f_back


def _copy_back(target: Any, tensor: Any) -> None:
    """Write an in-place result back into the caller's array unless they share memory."""
    if not isinstance(target, np.ndarray) or not isinstance(tensor, torch.Tensor):
        return
    if tensor.device.type == "cpu" and tensor.data_ptr() == target.ctypes.data:
        return
    np.copyto(target, tensor.detach().cpu().numpy())


def _add_batch_axis(value: Any, ndims: tuple[int, ...]) -> tuple[Any, bool]:
    if isinstance(value, torch.Tensor) and value.dim() in ndims:
        return value.unsqueeze(0), True
    return value, False


def _mapped(function: str, param: str, table: Mapping[Any, Any], value: Any) -> Any:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise UnsupportedOperation(
            f"{function}: {param}={value!r} is not supported; supported: {sorted(map(repr, table))}"
        ) from None


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        raise UnsupportedOperation(f"configuration value {value!r} is not hashable") from None
    return value
