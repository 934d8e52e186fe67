"""The replacements installed while batched execution is applied.

* A chain's library functions (``cv2.resize``, ``cv2.cvtColor``, ...): a call receiving a deferred
  value records; a call at one of the chain's entry sites, inside a DataLoader fetch, starts
  deferring (its data argument becomes the chain's source); every other call runs the original.
* Array conversions that NumPy and torch do not dispatch to a foreign type (``np.asarray``,
  ``np.array``, ``np.ascontiguousarray``, ``np.asanyarray``, ``torch.from_numpy``,
  ``torch.as_tensor``, ``torch.tensor``): record on a deferred argument, else the original.

Entry sites are matched against the plan's context keys as the per-call migration matches its
placements (:class:`codedag.plan.context.ContextMatcher`: the enclosing frames' names, innermost
first), cached per calling line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import codedag.backends.batched.deferred as deferred
import codedag.backends.batched.ops as ops
import codedag.backends.batched.views as views
from codedag.backends.batched.deferred import STATE, Lazy, has_lazy
from codedag.backends.batched.forcing import FORCED, short_path
from codedag.errors import UnsupportedOperation
from codedag.patching import like_original
from codedag.plan.context import ContextMatcher, frame_name

CONVERSIONS: tuple[str, ...] = (
    "numpy.asarray",
    "numpy.asanyarray",
    "numpy.ascontiguousarray",
    "numpy.array",
    "torch.from_numpy",
    "torch.as_tensor",
    "torch.tensor",
)
_WALK = 24


class EntryMatcher:
    """Whether a call of ``function`` starts a chain here; the site's name when it does."""

    def __init__(self, function: str, entries: list[str], others: list[str]) -> None:
        self.function = function
        pairs: list[tuple[str, Any]] = [(k, "defer") for k in entries]
        pairs += [(k, None) for k in others if k not in entries]
        self.matcher = ContextMatcher(function, pairs) if entries else None
        self._cache: dict[tuple[int, int], tuple[Any, str]] = {}
        self._counter = threading.local()

    def site(self, caller: Any) -> str:
        """The entry site of a call made from frame ``caller`` (empty: not an entry)."""
        key = (id(caller.f_code), caller.f_lineno)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is caller.f_code:
            return hit[1]
        cacheable = True
        if self.matcher is None:
            defer = True
        else:
            names = []
            frame = caller
            for _ in range(_WALK):
                if frame is None:
                    break
                names.append(frame_name(frame))
                frame = frame.f_back
            counter = self._own_counter(caller)
            placement, _level, cacheable = self.matcher.match_detail(tuple(names[::-1]), counter)
            defer = placement is not None
        site = f"{self.function} at {_where(caller)}" if defer else ""
        if cacheable:
            self._cache[key] = (caller.f_code, site)
        return site

    def _own_counter(self, caller: object) -> int:
        last = getattr(self._counter, "last", None)
        if last is not None and last[0] is caller:
            last[1] += 1
            return int(last[1])
        self._counter.last = [caller, 0]
        return 0


def _where(frame: Any) -> str:
    return f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def chain_function(
    name: str, original: Callable[..., Any], entry: EntryMatcher | None
) -> Callable[..., Any]:
    """The replacement of a chain's library function (see the module docstring)."""
    op = ops.library_op(name)
    state = STATE
    stopped = FORCED.is_stopped

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if has_lazy(args, kwargs):
            return deferred.call(op, original, args, kwargs, name)
        if not state.active or entry is None or op is None:
            return original(*args, **kwargs)
        site = entry.site(sys._getframe(1))
        if not site or stopped(site):
            return original(*args, **kwargs)
        data = _data_argument(op, args, kwargs)
        if data is None:
            return original(*args, **kwargs)
        try:
            return deferred.start(op, data, args, kwargs, site)
        except UnsupportedOperation:
            return original(*args, **kwargs)

    return like_original(replacement, original)


def _data_argument(op: ops.LibraryOp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The first per-sample data argument (image, signal) of a library call."""
    for position, value in enumerate(args):
        if op.slot_kind(position, value) == ops.DATA:
            return value
    for name, value in kwargs.items():
        if op.slot_kind(name, value) == ops.DATA:
            return value
    return None


def conversion(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The replacement of an array conversion: records on a deferred first argument."""

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], Lazy):
            op = views.to_tensor_op(name) if name.startswith("torch.") else views.numpy_view(name)
            return deferred.call(op, original, args, kwargs, name)
        return original(*args, **kwargs)

    return like_original(replacement, original)
