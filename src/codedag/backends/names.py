"""Canonical qualified names of functions: one name per function, everywhere in codedag.

``canonical_name(numpy.clip) == "numpy.clip"`` however user code spelled it (``np.clip``,
``from numpy import clip``). The name comes from the function object, not from the call site:

- public callables of indexed libraries (cv2, numpy, torch, ...) take the public path under which
  the library exposes them (``cv2.resize`` has no ``__module__``; ``torch.stack`` reports
  ``torch._VariableFunctionsClass.stack``);
- method descriptors and bound builtin methods take their defining class (``numpy.ndarray.astype``),
  or its nearest public subclass when it lives in a private module (``random.Random.random``);
- Python functions take ``__module__ + "." + __qualname__`` (``PIL.Image.Image.resize``);
- a replacement installed by :mod:`codedag.patching` is named after its original.

The tracer names a library's Python frames with :func:`public_code_name`: the public name of
the function whose code runs (``numpy.clip`` for ``numpy._core.fromnumeric.clip``).

Which namespaces are indexed is declared by each library package (``facts.py``, read through
:mod:`codedag.backends.libraries` without importing any library or backend).
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

from codedag.backends import libraries
from codedag.backends.derived import SequenceView

INDEXED_MODULES: Sequence[str] = SequenceView(libraries.indexed_modules)
"""Modules whose public namespace defines canonical names, in priority order (first name wins)."""

PUBLIC_PYTHON_MODULES: Sequence[str] = SequenceView(libraries.python_namespaces)
"""Namespaces whose public functions are implemented in Python (behind NumPy's array-function
dispatcher, or plain functions): their implementations' code objects carry the public name."""

_index: dict[int, tuple[Any, str]] = {}
_indexed: dict[str, int] = {}  # module -> its attributes when last indexed
_lock = threading.Lock()
_public_codes: dict[types.CodeType, str] = {}
_code_functions: dict[types.CodeType, types.FunctionType] = {}  # the first function of a code
_shared_wrappers: set[types.CodeType] = set()  # codes of several public functions
_shared_wrapper_ids: set[int] = set()  # their ids (hashing a code object hashes its bytecode)
_public_done: dict[str, int] = {}  # namespace -> its attributes when last scanned
# (len(sys.modules), the indexed modules' tuple) when every imported one was last found indexed
_seen: list[tuple[int, tuple[str, ...]]] = [(-1, ())]


def _refresh_index() -> None:
    """Index the public callables of every INDEXED_MODULES module imported since last time."""
    indexed = libraries.indexed_modules()
    count = len(sys.modules)
    last_count, last_indexed = _seen[0]
    if count == last_count and indexed is last_indexed:  # nothing imported since all indexed
        return
    if not _changed(indexed, _indexed):
        _seen[0] = (count, indexed)
        return
    with _lock:
        for module_name, attr, value in _new_attributes(indexed, _indexed):
            if isinstance(value, type | types.ModuleType):
                continue
            if callable(value) and not isinstance(value, types.FunctionType):
                # Among aliases (numpy.permute_dims is numpy.transpose) the attribute named like
                # the object itself wins; otherwise the first module's name stays.
                previous = _index.get(id(value))
                if _renames(previous[1] if previous else None, module_name, attr, value):
                    _index[id(value)] = (value, f"{module_name}.{attr}")


def _changed(module_names: Sequence[str], done: dict[str, int]) -> bool:
    """Whether a module named is imported and has attributes ``done`` has not seen."""
    for module_name in module_names:
        module = sys.modules.get(module_name)
        if module is not None and done.get(module_name) != len(vars(module)):
            return True
    return False


def _new_attributes(
    module_names: Sequence[str], done: dict[str, int]
) -> Iterator[tuple[str, str, object]]:
    """(module, attribute, value) of each public attribute of the modules named that are imported,
    done running their body and changed since ``done`` saw them (each is then noted there): a
    module that loads its names lazily (scikit-image's, through ``lazy_loader``) fills its
    namespace as names are first used."""
    for module_name in module_names:
        module = sys.modules.get(module_name)
        if module is None or _initializing(module):
            continue
        names = vars(module)
        if done.get(module_name) == len(names):
            continue
        done[module_name] = len(names)
        for attr, value in list(names.items()):
            if not attr.startswith("_"):
                yield module_name, attr, value


def _renames(previous: str | None, module_name: str, attr: str, value: object) -> bool:
    """Whether ``module_name.attr`` replaces the name ``previous`` of ``value``: the first name
    stays, unless one in the same module is named like the object itself."""
    if previous is None:
        return True
    previous_module, previous_attr = previous.rsplit(".", 1)
    return (
        attr == getattr(value, "__name__", None)
        and previous_module == module_name
        and previous_attr != attr
    )


def _initializing(module: object) -> bool:
    """Whether a module is still running its body (an import in progress): index it later."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def python_implementation(obj: object) -> types.FunctionType | None:
    """The Python function behind a NumPy public function (itself, or what its array-function
    dispatcher calls), or None for C implementations and other objects."""
    if isinstance(obj, types.FunctionType):
        return obj
    if type(obj).__name__ == "_ArrayFunctionDispatcher":
        impl = getattr(obj, "__wrapped__", None)
        if isinstance(impl, types.FunctionType):
            return impl
    return None


def _refresh_public_codes() -> None:
    namespaces = libraries.python_namespaces()
    if not _changed(namespaces, _public_done):
        return
    libraries_of_namespaces = libraries.python_modules()
    with _lock:
        for module_name, attr, value in _new_attributes(namespaces, _public_done):
            impl = python_implementation(value)
            if impl is None or _top(impl.__module__) not in libraries_of_namespaces:
                continue
            _name_code(impl, module_name, attr)
            # a decorated function (``functools.wraps``): the function it wraps runs next
            inner = getattr(impl, "__wrapped__", None)
            if isinstance(inner, types.FunctionType) and inner is not impl:
                _name_code(inner, module_name, attr)


def _name_code(impl: types.FunctionType, module_name: str, attr: str) -> None:
    """Name ``impl``'s code ``module_name.attr``, unless several functions share that code."""
    code = impl.__code__
    if code in _shared_wrappers:
        return
    first = _code_functions.setdefault(code, impl)
    if first is not impl:  # a decorator's wrapper, one per function it decorates: no one name
        _shared_wrappers.add(code)
        _shared_wrapper_ids.add(id(code))  # kept alive by _code_functions
        _public_codes.pop(code, None)
        return
    # the first namespace wins; within one, the attribute named like the function
    if _renames(_public_codes.get(code), module_name, attr, impl):
        _public_codes[code] = f"{module_name}.{attr}"


def _top(module: str | None) -> str:
    return (module or "").split(".", 1)[0]


def public_code_name(code: types.CodeType) -> str | None:
    """The public name of a library function implemented by ``code`` in Python (``numpy.clip``
    for the code of ``numpy._core.fromnumeric.clip``), or None."""
    name = _public_codes.get(code)
    if name is None and code not in _shared_wrappers:  # a name once given stays
        _refresh_public_codes()
        name = _public_codes.get(code)
    return name


def is_shared_wrapper(code: types.CodeType) -> bool:
    """Whether ``code`` is the wrapper a library's decorator made for several of its public
    functions (scikit-image's ``deprecate_parameter`` around ``imread`` and ``imread_collection``):
    its frame does not say which one runs, the wrapped function's frame, named, comes next."""
    if code in _shared_wrappers:
        return True
    _refresh_public_codes()
    return code in _shared_wrappers


def shared_wrapper_ids() -> set[int]:
    """The ids of the codes :func:`is_shared_wrapper` accepts so far (the live set, which grows
    as libraries are imported): a call made by such a wrapper is made where the wrapper was
    called."""
    return _shared_wrapper_ids


def is_numpy_dispatcher(code: types.CodeType, module_name: str) -> bool:
    """Whether ``code`` is one of NumPy's array-function dispatchers (``_clip_dispatcher``, and
    every function of ``numpy._core.multiarray``, which only forward C functions' arguments)."""
    if not module_name.startswith("numpy"):
        return False
    return code.co_name.endswith("_dispatcher") or module_name == "numpy._core.multiarray"


def _defining_class(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return cls


def _public_class(cls: type, name: str) -> type:
    """The class of ``cls``'s MRO that defines ``name``, or when that one lives in a private
    top-level module (``_random.Random``), the public subclass nearest to it that ``cls`` derives
    from (``random.Random``): a method is named after a class user code can name."""
    defining = _defining_class(cls, name)
    if not _top(getattr(defining, "__module__", None)).startswith("_"):
        return defining
    public = [
        k for k in cls.__mro__ if issubclass(k, defining) and not _top(k.__module__).startswith("_")
    ]
    return public[-1] if public else defining


def _type_name(cls: type) -> str:
    module = getattr(cls, "__module__", None) or "builtins"
    return f"{module}.{cls.__qualname__}"


def _python_function_name(obj: types.FunctionType) -> str:
    """A Python function's public name where a library declares it, else its own."""
    if _top(obj.__module__) in libraries.python_modules():
        # a decorator's shared wrapper is named after the function it wraps
        inner = getattr(obj, "__wrapped__", None) if is_shared_wrapper(obj.__code__) else obj
        if isinstance(inner, types.FunctionType):
            public = public_code_name(inner.__code__)
            if public is not None:
                return public
    return f"{obj.__module__}.{obj.__qualname__}"


def canonical_name(obj: Any) -> str:
    """The canonical qualified name of a callable (``cv2.resize``, ``numpy.ndarray.astype``).

    Args:
        obj: a function, builtin, method, method descriptor, ufunc, partial or class.

    Returns:
        A dotted name; ``builtins.<name>`` for Python builtins; for an object without any
        naming information, ``<module of its type>.<type name>``.
    """
    original = getattr(obj, "__codedag_original__", None)
    if original is not None:
        obj = original
    if isinstance(obj, functools.partial):
        obj = obj.func
    _refresh_index()
    hit = _index.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
        hit = _index.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
    if isinstance(obj, types.FunctionType):
        return _python_function_name(obj)
    if isinstance(obj, types.BuiltinFunctionType):  # builtin functions and bound builtin methods
        owner = obj.__self__
        if isinstance(owner, types.ModuleType):
            return f"{owner.__name__}.{obj.__name__}"
        if owner is not None and not isinstance(owner, type):
            return f"{_type_name(_public_class(type(owner), obj.__name__))}.{obj.__name__}"
        if isinstance(owner, type):
            return f"{_type_name(owner)}.{obj.__name__}"
        return _module_attribute(obj) or f"{obj.__module__ or 'builtins'}.{obj.__qualname__}"
    objclass = getattr(obj, "__objclass__", None)
    if isinstance(objclass, type):  # method/wrapper/getset descriptors of C types
        return f"{_type_name(objclass)}.{obj.__name__}"
    if isinstance(obj, type):
        return _type_name(obj)
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if type(obj).__name__ == "ufunc":
        module = "numpy"
    if module and qualname:
        return f"{module}.{qualname}"
    return _type_name(type(obj))


def _module_attribute(obj: types.BuiltinFunctionType) -> str | None:
    """The name of a builtin that names no module (cv2's functions) under which an indexed
    module holds it now, indexed from here on; None where none does.

    A module is indexed once: a function replaced there at that time (a test's or a profiler's
    wrapper) and put back later is found here, by its name, rather than named ``builtins.*``.
    """
    for module_name in libraries.indexed_modules():
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, obj.__name__, None) is obj:
            name = f"{module_name}.{obj.__name__}"
            with _lock:
                _index.setdefault(id(obj), (obj, name))
            return name
    return None


def qualname_of(code: types.CodeType) -> str:
    """``co_qualname`` of a code object (Python 3.11+; ``co_name`` before)."""
    return str(getattr(code, "co_qualname", code.co_name))
