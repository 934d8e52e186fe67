"""Cost of the migration wrapper itself, side by side in one run.

Cases (ns per call, the best of ``--repeats`` timing loops of ``--loops`` calls each: on a shared
machine the best loop is the one least disturbed by other work):

* ``unpatched``: the original function;
* ``pass-through, plan names the caller``: patched, the plan keeps the calls made from this
  helper function on the CPU (a fresh caller frame per call, as ``__getitem__`` has); the
  placement is cached per caller code object (the usual case for mixed placements);
* ``pass-through, plan names a large caller``: the same with a caller the size of a real
  ``__getitem__``;
* ``pass-through, same caller frame``: the same placement, all calls from one frame (a loop);
* ``pass-through, plan names an outer frame``: the plan names only the helper's caller: the
  enclosing frames are walked up to the one that decides, and the answer is cached on that path;
* ``floor: forwarding function`` and ``floor: forwarding + caller lookup``: what any Python
  replacement costs, through the same helper: a function forwarding ``*args, **kwargs``, and
  one that also finds its caller's placement (frame, dict lookup by code identity, counter);
* ``migrated call``: a migrated call of an identity backend on a one-element array on the CPU,
  run-time check off (it would switch this op back to the library); a result that is the
  input comes back as a copy;
* ``migrated call, new result``: the same with a backend returning a new tensor (a copy), the
  usual case: its array is returned without a copy, after the check that it shares no input's
  memory;
* ``migrated call, guard decided``: the same after the run-time guard kept the placement (only
  in a tree that has the guard);
* ``executor alone`` and ``backend alone``: the value conversion plus backend, and the backend,
  called directly;
* ``floor: conversion only`` and ``floor: conversion only, new result``: the value conversion
  with no codedag code, ``torch.from_numpy(a)``, the identity backend (or the one returning
  ``t.clone()``), ``.numpy()``: what any dispatch to a torch backend pays on a NumPy argument.

Library calls as they are written (``REAL_CALLS``: NumPy and cv2 functions on small arrays,
through the default registry) add three rows each: the library function, the migrated call
(executor: the op's declared check, value conversion, the backend) and the declared check alone
(where the tree has one). On arrays this small the library is fast and the rows show what a
migrated call costs beyond its arithmetic; the run-time guard sends such calls back to the library.

Derived rows split a migrated call's dispatch (everything but the op): the wrapper's share
(migrated call minus executor) and the executor's share (value conversion in and out), and what
a migrated call costs beyond the conversion floor (the part a dispatch design can act on).

``--against REF`` runs the same cases on the source tree of git revision ``REF`` (exported to a
temporary folder, imported in a subprocess) in the same run, interleaved with this tree's, and
prints both columns and their ratio: before/after figures measured under the same conditions.

Usage: ``python benchmarks/migrate_overhead.py [--loops N] [--repeats R] [--against REF] [--json]``.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

MODULE = "codedag_bench_lib"
ROOT = Path(__file__).resolve().parent.parent


def _library() -> types.ModuleType:
    lib = types.ModuleType(MODULE)

    def op(a: Any, b: Any = None) -> Any:
        return a

    def copy(a: Any, b: Any = None) -> Any:
        return a.copy()

    op.__module__ = copy.__module__ = MODULE
    lib.op = op  # type: ignore[attr-defined]
    lib.copy = copy  # type: ignore[attr-defined]
    sys.modules[MODULE] = lib
    return lib


def _identity_backend(a: torch.Tensor, b: Any = None) -> torch.Tensor:
    return a


def _copy_backend(a: torch.Tensor, b: Any = None) -> torch.Tensor:
    return a.clone()


def call_loop(fn: Callable[[Any], Any], arg: Any, loops: int) -> None:
    """The call site every case times (plan keys name this function as the caller)."""
    for _ in range(loops):
        fn(arg)


def outer_loop(fn: Callable[[Any], Any], arg: Any, loops: int) -> None:
    """Calls ``fn`` through a helper: the plan names this function, not the helper."""
    for _ in range(loops):
        _helper(fn, arg)


def _helper(fn: Callable[[Any], Any], arg: Any) -> Any:
    return fn(arg)


def large_loop(fn: Callable[[Any], Any], arg: Any, loops: int) -> None:
    """Calls ``fn`` through a caller the size of a real ``__getitem__``."""
    for _ in range(loops):
        _large_caller(fn, arg, None)


def _large_caller(fn: Callable[[Any], Any], arg: Any, options: dict[str, Any] | None) -> Any:
    """A caller with a realistic body (hashing a code object hashes all of it)."""
    if options is not None:
        size = options.get("size", (224, 224))
        mean = options.get("mean", (0.485, 0.456, 0.406))
        std = options.get("std", (0.229, 0.224, 0.225))
        flip = options.get("flip", 0.5)
        crop = options.get("crop", (0.08, 1.0))
        ratio = options.get("ratio", (3 / 4, 4 / 3))
        if options.get("grayscale"):
            mean, std = mean[:1], std[:1]
        if options.get("jitter"):
            brightness = options.get("brightness", 0.4)
            contrast = options.get("contrast", 0.4)
            saturation = options.get("saturation", 0.4)
            hue = options.get("hue", 0.1)
            options["jitter_params"] = (brightness, contrast, saturation, hue)
        options["resolved"] = (size, mean, std, flip, crop, ratio)
        label = options.get("label", -1)
        if label < 0:
            raise ValueError(f"sample without a label: {options!r}")
    return fn(arg)


def _real_calls() -> list[tuple[str, tuple[Any, ...]]]:
    """Calls as pipelines write them, on small inputs (the library's own time is small)."""
    gray = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    image = np.arange(192, dtype=np.uint8).reshape(8, 8, 3)
    return [
        ("numpy.add", (gray, gray)),
        ("numpy.multiply", (gray, 2.0)),
        ("numpy.clip", (gray, 0.0, 0.5)),
        ("numpy.mean", (gray,)),
        ("cv2.flip", (image, 1)),
        ("cv2.cvtColor", (image, 4)),
    ]


def _library_function(name: str) -> Callable[..., Any]:
    """The library function ``name`` names (resolved here: ``--against`` trees may predate
    ``codedag.backends.probe.original_function``)."""
    module, *path = name.split(".")
    value: Any = importlib.import_module(module)
    for part in path:
        value = getattr(value, part)
    return value  # type: ignore[no-any-return]


def _calling(fn: Callable[..., Any], *args: Any) -> Callable[[Any], Any]:
    """``fn(*args)`` as a function of the one argument ``call_loop`` passes (ignored)."""
    return lambda _: fn(*args)


def _measure_real_calls(loops: int, sample: Callable[[str, float], None]) -> None:
    from codedag.backends.device_values import ValueConverter
    from codedag.backends.executor import Executor
    from codedag.backends.registry import default_registry

    registry = default_registry()
    converters = {"cpu": ValueConverter("cpu")}
    for name, args in _real_calls():
        spec = registry.get(name)
        if spec is None:
            continue
        original = _library_function(name)
        executor = Executor(spec, original, converters)
        check = getattr(getattr(spec, "quirks", None), "check", None)
        sample(f"{name}: library", _best_ns(call_loop, _calling(original, *args), None, loops))
        value = _best_ns(call_loop, _calling(executor.run, args, {}, "cpu"), None, loops)
        sample(f"{name}: migrated", value)
        if check is not None:
            value = _best_ns(call_loop, _calling(check, *args), None, loops)
            sample(f"{name}: declared check", value)


def _forwarders(op: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The floor of a pass-through in Python: a function forwarding ``*args, **kwargs``, and
    the same finding its caller's placement (one frame, one dict lookup, one counter)."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        return op(*args, **kwargs)

    placements: dict[int, tuple[Any, Callable[[], int]]] = {}
    getframe = sys._getframe
    count = itertools.count().__next__

    def forward_by_caller(*args: Any, **kwargs: Any) -> Any:
        placement = placements.get(id(getframe(1).f_code))
        if placement is not None:
            placement[1]()
        return op(*args, **kwargs)

    placements[id(_helper.__code__)] = (None, count)
    return forward, forward_by_caller


def _convert_identity(a: np.ndarray) -> np.ndarray:
    """The conversion floor: NumPy in, the identity backend, NumPy out (no codedag code)."""
    return _identity_backend(torch.from_numpy(a)).numpy()


def _convert_copy(a: np.ndarray) -> np.ndarray:
    """The conversion floor with a new result (the backend returns ``t.clone()``)."""
    return _copy_backend(torch.from_numpy(a)).numpy()


def _best_ns(loop: Callable[..., None], fn: Callable[[Any], Any], arg: Any, loops: int) -> float:
    start = time.perf_counter_ns()
    loop(fn, arg, loops)
    return (time.perf_counter_ns() - start) / loops


def _plan(mapping: dict[str, Any], keep: list[str]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "context_device_map": mapping,
        "calls": [{"function": f"{MODULE}.op", "context_keys": keep, "migrate": False}],
    }


def _guarded_injector(registry: Any, here: str) -> Any:
    """A PatchInjector whose guard has kept the placement, or None in a tree without a guard."""
    try:
        from codedag.migrate.guard import GuardSettings
        from codedag.migrate.injector import PatchInjector
    except ImportError:
        return None
    # A fake clock for the one checked call (backend first, then the original): the backend's
    # interval reads 1 us, the original's 2 us, so the backend beats it: kept.
    ticks = itertools.chain([0, 1000, 1000, 3000], range(4000, 10**12, 1000))
    settings = GuardSettings(calls=1, clock_ns=lambda: next(ticks))
    entries = {f"{MODULE}.op": [(f"{here}#0/{MODULE}.op#0", "cpu")]}
    return PatchInjector(entries, registry, {}, guard=settings)


def _migrator(migrator_class: Any, plan: dict[str, Any], registry: Any) -> Any:
    """A migrator with the run-time guard off (trees without a guard take no such argument)."""
    try:
        return migrator_class.from_plan(plan, registry=registry, guard=False)
    except TypeError:
        return migrator_class.from_plan(plan, registry=registry)


def measure(loops: int, repeats: int) -> dict[str, float]:
    """Every case of the module docstring, best of ``repeats``, in ns per call."""
    from codedag.backends.device_values import ValueConverter
    from codedag.backends.executor import Executor
    from codedag.backends.registry import Registry, spec_from_backend
    from codedag.migrate.api import PipelineMigrator

    lib = _library()
    registry = Registry()
    spec = spec_from_backend(f"{MODULE}.op", _identity_backend, "numpy")
    registry.register(spec)
    registry.register(spec_from_backend(f"{MODULE}.copy", _copy_backend, "numpy"))
    tiny = np.zeros(1, dtype=np.float32)
    tensor = torch.from_numpy(tiny)
    executor = Executor(spec, lib.op, {"cpu": ValueConverter("cpu")})
    here = f"{__name__}.{call_loop.__qualname__}"
    helper = f"{__name__}.{_helper.__qualname__}"
    large = f"{__name__}.{_large_caller.__qualname__}"
    outer = f"{__name__}.{outer_loop.__qualname__}"
    keep_here = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{here}#0/{MODULE}.op#0"])
    keep_helper = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{helper}#0/{MODULE}.op#0"])
    keep_large = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{large}#0/{MODULE}.op#0"])
    keep_outer = _plan({f"other.f#0/{MODULE}.op#0": "cpu"}, [f"{outer}#0/{MODULE}.op#0"])
    migrate_here = _plan({f"{here}#0/{MODULE}.op#0": "cpu"}, [])
    migrate_copy = _plan({f"{here}#0/{MODULE}.copy#0": "cpu"}, [])

    def run_executor(arg: Any) -> Any:
        return executor.run((arg,), {}, "cpu")

    samples: dict[str, list[float]] = {}

    def sample(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    for _ in range(repeats):
        sample("unpatched", _best_ns(call_loop, lib.op, tiny, loops))
        sample("unpatched, through a helper", _best_ns(outer_loop, lib.op, tiny, loops))
        forward, forward_by_caller = _forwarders(lib.op)
        sample("floor: forwarding function", _best_ns(outer_loop, forward, tiny, loops))
        value = _best_ns(outer_loop, forward_by_caller, tiny, loops)
        sample("floor: forwarding + caller lookup", value)
        sample("unpatched, through a large caller", _best_ns(large_loop, lib.op, tiny, loops))
        sample("backend alone", _best_ns(call_loop, _identity_backend, tensor, loops))
        sample("backend alone, new result", _best_ns(call_loop, _copy_backend, tensor, loops // 4))
        sample("executor alone", _best_ns(call_loop, run_executor, tiny, loops // 4))
        sample("floor: conversion only", _best_ns(call_loop, _convert_identity, tiny, loops // 4))
        value = _best_ns(call_loop, _convert_copy, tiny, loops // 4)
        sample("floor: conversion only, new result", value)
        with PipelineMigrator.from_plan(keep_helper, registry=registry):
            value = _best_ns(outer_loop, lib.op, tiny, loops)
            sample("pass-through, plan names the caller", value)
        with PipelineMigrator.from_plan(keep_large, registry=registry):
            value = _best_ns(large_loop, lib.op, tiny, loops)
            sample("pass-through, plan names a large caller", value)
        with PipelineMigrator.from_plan(keep_here, registry=registry):
            sample("pass-through, same caller frame", _best_ns(call_loop, lib.op, tiny, loops))
        with PipelineMigrator.from_plan(keep_outer, registry=registry):
            value = _best_ns(outer_loop, lib.op, tiny, loops)
            sample("pass-through, plan names an outer frame", value)
        # guard off: on this identity op the run-time check would switch the placement back to
        # the library after 8 calls, and the row would time a pass-through
        with _migrator(PipelineMigrator, migrate_here, registry) as migrator:
            sample("migrated call", _best_ns(call_loop, lib.op, tiny, loops // 4))
            assert migrator.get_stats()["functions"][f"{MODULE}.op"]["migrated"] > 0
        with _migrator(PipelineMigrator, migrate_copy, registry) as migrator:
            value = _best_ns(call_loop, lib.copy, tiny, loops // 4)
            sample("migrated call, new result", value)
            assert migrator.get_stats()["functions"][f"{MODULE}.copy"]["migrated"] > 0
        injector = _guarded_injector(registry, here)
        if injector is not None:
            injector.apply_all()
            try:
                lib.op(tiny)  # the guard checks this call and keeps the placement
                state = injector.wrappers[f"{MODULE}.op"].stats()["guard"]["state"]
                assert state == "kept", state
                sample(
                    "migrated call, guard decided", _best_ns(call_loop, lib.op, tiny, loops // 4)
                )
            finally:
                injector.restore_all()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _measure_real_calls(max(1, loops // 40), sample)
    del sys.modules[MODULE]
    return {name: min(values) for name, values in samples.items()}


# case -> the case it adds to: the "added" column is the difference.
BASES = {
    "floor: forwarding function": "unpatched, through a helper",
    "floor: forwarding + caller lookup": "unpatched, through a helper",
    "pass-through, plan names the caller": "unpatched, through a helper",
    "pass-through, plan names a large caller": "unpatched, through a large caller",
    "pass-through, same caller frame": "unpatched",
    "pass-through, plan names an outer frame": "unpatched, through a helper",
    "migrated call": "backend alone",
    "migrated call, new result": "backend alone, new result",
    "migrated call, guard decided": "backend alone",
    "executor alone": "backend alone",
    "floor: conversion only": "backend alone",
    "floor: conversion only, new result": "backend alone, new result",
}


def added(results: dict[str, float]) -> dict[str, float]:
    """What each case adds to its base: the dispatch cost (for a migrated call: all but the op)."""
    rows = {name: results[name] - results[base] for name, base in BASES.items() if name in results}
    rows["wrapper share of a migrated call"] = results["migrated call"] - results["executor alone"]
    for case, row in (
        ("", "migrated call over the conversion"),
        (", new result", "new result over the conversion"),
    ):
        floor = results.get(f"floor: conversion only{case}")
        if floor is not None:
            rows[row] = results[f"migrated call{case}"] - floor
    return rows


def _export(ref: str, folder: Path) -> Path:
    """The ``src`` tree of git revision ``ref`` under ``folder``."""
    archive = folder / "src.tar"
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref, "src"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def _against(ref: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        src = _export(ref, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(src)}
        command = [sys.executable, __file__, "--json", "--loops", str(args.loops)]
        command += ["--repeats", str(args.repeats)]
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(output.stdout))


def _print(results: dict[str, float], baseline: dict[str, float] | None, ref: str) -> None:
    sections = [("ns per call", results, baseline), ("added ns per call", added(results), None)]
    if baseline is not None:
        sections[1] = ("added ns per call", added(results), added(baseline))
    for title, rows, before in sections:
        if before is None:
            print(f"{title:40s} {'this tree':>10s}")
            for name, value in rows.items():
                print(f"  {name:38s} {value:10.0f}")
        else:
            print(f"{title:40s} {ref[:12]:>12s} {'this tree':>10s} {'ratio':>7s}")
            for name, value in rows.items():
                old = before.get(name)
                if old is None:
                    print(f"  {name:38s} {'n/a':>12s} {value:10.0f}")
                else:
                    print(f"  {name:38s} {old:12.0f} {value:10.0f} {value / old:7.2f}")
        print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--against", metavar="REF", help="also measure git revision REF")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.against:
        # Interleaved: the baseline's loops and ours alternate, each best of its repeats.
        baseline: dict[str, float] = {}
        results: dict[str, float] = {}
        rounds = 3
        for _ in range(rounds):
            for name, value in _against(args.against, args).items():
                baseline[name] = min(value, baseline.get(name, value))
            for name, value in measure(args.loops, args.repeats).items():
                results[name] = min(value, results.get(name, value))
        if args.json:
            print(json.dumps({"this tree": results, args.against: baseline}, indent=2))
        else:
            _print(results, baseline, args.against)
        return 0
    results = measure(args.loops, args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))  # raw cases: --against reads them
    else:
        _print(results, None, "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
