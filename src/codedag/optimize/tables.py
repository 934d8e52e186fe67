"""Finding element-wise runs on uint8 arrays in a traced batch, for lookup tables (pure).

In each traced sample, a *run* is a chain of element-wise calls (the operators and NumPy calls
of :data:`~codedag.migrate.tables.lookup.ELEMENTWISE`) where each value goes to exactly one next
operation, starting at the uint8 array of a library call, its *producer*
(``cv2.warpAffine(...).astype(np.float32) / 255.0``), or at a conversion that casts one
(``np.asarray(image, dtype=np.float32) / 255.0``). Runs of different samples with the same
producer called from the same function are one :class:`~codedag.plan.tables.TableRun`.

A producer inside a cached chain is left to the prefix cache, which gathers its runs itself in
the first epoch and reads its values back after. Whether a table is used is not decided here: it
is measured where the run happens, bit for bit and in time, on each process's first samples.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from codedag.backends.libraries import library_modules, modules_taking
from codedag.graph.model import ExecutionDAG
from codedag.migrate.tables.lookup import ELEMENTWISE
from codedag.migrate.tables.runtime import CONVERSIONS
from codedag.optimize.cache import caller_of
from codedag.optimize.chains import _consumers, _value_of
from codedag.optimize.samples import is_operation, traced_samples
from codedag.patching import addressable
from codedag.plan.tables import TableRun, TablesSection

MIN_CALLS = 2
"""Element-wise calls (a conversion's cast counts) a run needs: one pass gains nothing."""

_METHODS = ("torch.Tensor.", "torch._C.TensorBase.", "PIL.Image.Image.")
ALWAYS_GUARDED = ("torch.as_tensor", "torch.from_numpy")
"""What ``default_collate`` turns arrays into tensors with: a run value a sample returns as it
is reaches them there, outside the traced samples."""
_NOT_PATCHABLE = ("operator.", "numpy.ndarray.", "builtins.", *_METHODS)
"""Operators and methods: a producer must be a library function the migrator can patch."""


def find_runs(
    dag: ExecutionDAG, cached: frozenset[str] = frozenset(), owned: frozenset[str] = frozenset()
) -> TablesSection:
    """The runs of the traced samples and the functions to guard. Producers in ``cached`` (a
    cached chain's functions) are left to the cache; functions in ``owned`` (patched by a
    placement or a batched chain: one owner per function) are neither producers nor guards."""
    found: dict[tuple[str, str], list[tuple[list[str], str, int]]] = {}
    calls: set[str] = set()
    for sample in traced_samples(dag):
        ops = [n for n in sample if is_operation(n)]
        inside = {n.id for n in ops}
        calls.update(n.name for n in ops)
        for node in ops:
            if node.name in ELEMENTWISE or node.name in cached or node.name in owned:
                continue
            if node.name.startswith(_NOT_PATCHABLE) or not addressable(node.name):
                continue
            run = _run_from(dag, node, inside)
            if run is not None:
                found.setdefault((node.name, caller_of(node)), []).append(run)
    runs = [
        TableRun(
            producer=producer,
            callers=[caller] if caller else [],
            calls=max((r[0] for r in traced), key=len),
            consumer=traced[0][1],
            traced_ns=int(median(r[2] for r in traced)),
            samples=len(traced),
        )
        for (producer, caller), traced in sorted(found.items())
    ]
    arrays_only = {
        n for n in calls if _arrays_only(n) and not n.startswith(_METHODS) and addressable(n)
    }
    guards = sorted((arrays_only | set(ALWAYS_GUARDED)) - owned)
    return TablesSection(runs=runs, guards=guards, note=_note(runs))


def restrict(
    section: TablesSection, cached: frozenset[str], owned: frozenset[str]
) -> TablesSection:
    """``section`` without the runs whose producer is in ``cached`` (left to the prefix cache)
    or in ``owned`` (patched by a placement or a batched chain), and without guards of
    ``owned`` functions: what :func:`find_runs` finds with these arguments."""
    runs = [r for r in section.runs if r.producer not in cached and r.producer not in owned]
    guards = [g for g in section.guards if g not in owned]
    if runs == section.runs and guards == section.guards:
        return section
    return section.model_copy(update={"runs": runs, "guards": guards, "note": _note(runs)})


def _note(runs: list[TableRun]) -> str:
    return "" if runs else "no element-wise run on a uint8 array in the traced samples"


def _arrays_only(name: str) -> bool:
    """Whether ``name`` belongs to a library that takes its own arrays only: one that declares
    neither ``__array__`` nor the sequence protocol (``facts.py``: cv2, Pillow, torch, librosa,
    not NumPy or ``random``), so it is guarded."""
    top = name.split(".", 1)[0]
    takes_values = top in modules_taking("__array__") or top in modules_taking("__getitem__")
    return top in library_modules() and not takes_values


_UINT8_MODES = frozenset({"L", "RGB", "RGBA", "CMYK", "YCbCr", "LAB", "HSV", "LA", "RGBX"})
"""PIL modes whose array is uint8."""


def _casts_uint8(node: Any) -> bool:
    """Whether a conversion's input is a uint8 array or an image of a uint8 mode (``True``
    where its arguments were not recorded: the run time checks every call)."""
    if node.args is None:
        return True
    for entry in node.args:
        if entry.get("kind") == "array":
            return bool(entry.get("dtype") == "uint8")
        if entry.get("kind") == "image":
            return str(entry.get("mode", "")) in _UINT8_MODES
    return False


def _run_from(dag: ExecutionDAG, node: Any, inside: set[int]) -> tuple[list[str], str, int] | None:
    """The run ``node`` produces: its calls, what takes its last value, its traced time."""
    value = _value_of(dag, node.id)
    dtype = getattr(value, "dtype", None)
    conversion = node.name in CONVERSIONS and dtype not in (None, "uint8") and _casts_uint8(node)
    if dtype != "uint8" and not conversion:
        return None
    names = ["numpy.ndarray.astype"] if conversion else []
    total = node.total_ns if conversion else 0
    current = node
    while True:
        nexts: list[Any] = [dag.nodes[i] for i in _consumers(dag, current.id, inside)]
        if len(nexts) != 1 or nexts[0].name not in ELEMENTWISE:
            break
        current = nexts[0]
        names.append(current.name)
        total += int(current.total_ns)
    if len(names) < MIN_CALLS:
        return None
    consumer = nexts[0].name if len(nexts) == 1 else ""
    return names, consumer, total
