"""Recording wrappers around C-implemented library entry points (cv2, numpy, ...).

``sys.setprofile`` reports C functions without their arguments or results, so dataflow through
``cv2.resize`` needs interposition: for the tracing window, the public callables of the wrapped
libraries are replaced through :class:`codedag.patching.Patcher` (which restores the exact
originals) by wrappers whose frames
the tracer's hooks record. A wrapper only forwards the call: each has a code object of its own
(:data:`WRAPPER_CODES`), and the hooks record a call of it, with its arguments and result, from
the events of its frame, as a call of the function it wraps. Outside a traced thread nothing
sees those events. Only modules already imported are wrapped: tracing never imports a library.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from codedag.backends import libraries
from codedag.backends.derived import SequenceView
from codedag.backends.names import canonical_name, python_implementation
from codedag.patching import ORIGINAL_ATTR, Patcher, like_original

log = logging.getLogger(__name__)

WRAPPED_MODULES: Sequence[str] = SequenceView(libraries.wrapped_modules)
"""Modules whose public C-level callables are wrapped during tracing (declared by each library
package, with the names never wrapped: wrapping them would change behaviour or recurse into the
tracer)."""
# id(original) -> (original, wrapper): wrappers are made once per process and reused by every
# window (a wrapper only forwards outside a window). Originals are module-level functions.
_WRAPPERS: dict[int, tuple[Any, Callable[..., Any]]] = {}


def _wrappable(value: object) -> bool:
    if isinstance(value, type | types.ModuleType) or not callable(value):
        return False
    if getattr(value, ORIGINAL_ATTR, None) is not None:
        return False  # already a replacement (another tracer, a migration)
    if python_implementation(value) is not None:
        # a Python function (or one behind NumPy's dispatcher): the profile hook sees its frame
        # with the real arguments and result, under its public name (names.public_code_name)
        return False
    # ufuncs carry methods (np.add.reduce) a plain wrapper function would hide
    return type(value).__name__ != "ufunc"


_targets_cache: dict[tuple[Any, ...], list[str]] = {}


def library_targets(extra: Iterable[str] = ()) -> list[str]:
    """Qualified names to wrap now: public C callables of imported WRAPPED_MODULES (every alias:
    ``numpy.concat`` and ``numpy.concatenate`` are one function under two names), plus
    ``extra``. Cached while the modules' namespaces keep their size."""
    extra = tuple(extra)
    modules = libraries.wrapped_modules()
    key: tuple[Any, ...] = (extra, modules)
    for module_name in modules:
        module = sys.modules.get(module_name)
        key += (id(module), len(vars(module)) if module is not None else 0)
    hit = _targets_cache.get(key)
    if hit is not None:
        return list(hit)
    names = _scan_targets(modules, extra)
    _targets_cache.clear()
    _targets_cache[key] = names
    return list(names)


def _scan_targets(modules: tuple[str, ...], extra: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    never = libraries.not_wrapped()
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for attr, value in list(vars(module).items()):
            name = f"{module_name}.{attr}"
            if attr.startswith("_") or name in never or not _wrappable(value):
                continue
            names.append(name)
    names.extend(n for n in extra if n not in names)
    return names


# The code object of each recording wrapper -> (canonical name, library key) of what it wraps.
WRAPPER_CODES: dict[types.CodeType, tuple[str, str]] = {}


def make_wrapper(name: str, library: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A function that calls ``original``; the tracer's hooks record its calls as ``name``."""
    call = original

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    # A code object of its own (named after the function, which tracebacks show): the hooks
    # tell the wrappers apart by code object, one dictionary lookup per event.
    changes: dict[str, Any] = {"co_name": name}
    if hasattr(wrapper.__code__, "co_qualname"):  # Python 3.11+
        changes["co_qualname"] = name
    wrapper.__code__ = wrapper.__code__.replace(**changes)
    WRAPPER_CODES[wrapper.__code__] = (name, library)
    return like_original(wrapper, original)


def bind_references(patcher: Patcher, reach: Iterable[object] = ()) -> int:
    """Point the references to wrapped functions held in the pipeline's modules, and reachable
    from ``reach``, at the wrappers (restored with the patcher); returns how many."""
    return patcher.rebind_within([*libraries.pipeline_modules(), *reach])


def install(patcher: Patcher, names: Iterable[str], library_of: Callable[[str], str]) -> list[str]:
    """Wrap ``names`` through ``patcher``; return the names wrapped (failures are logged)."""
    names = list(names)

    def factory(qualified: str, original: Callable[..., Any]) -> Callable[..., Any]:
        hit = _WRAPPERS.get(id(original))
        if hit is not None and hit[0] is original:
            return hit[1]
        canonical = canonical_name(original)
        wrapper = make_wrapper(canonical, library_of(canonical.rsplit(".", 1)[0]), original)
        _WRAPPERS[id(original)] = (original, wrapper)
        return wrapper

    try:
        patcher.patch_many(names, factory, rebind_references=False)
        return names
    except Exception as error:
        log.debug("wrapping all at once failed (%s); wrapping one by one", error)
    wrapped = []
    for name in names:
        try:
            patcher.patch_many([name], factory, rebind_references=False)
            wrapped.append(name)
        except Exception as error:
            log.debug("cannot wrap %s: %s", name, error)
    return wrapped
