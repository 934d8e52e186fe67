"""Finding each sample's chain of deferrable calls in a traced DataLoader batch (a pure pass).

Batched execution (:mod:`codedag.migrate.batched`) defers, inside ``__getitem__``, a chain of
operations that starts at a library call with a batch-first backend and goes on through NumPy
operators and ufuncs, views and casts and the conversion to torch; the main process then runs the
chain once per batch. A chain is worth planning only where nothing in the sample forces it, so
this pass keeps, per sample, the *closed* operations: deferrable ones whose every consumer in the
sample is closed too (what the sample returns reaches collate, which batches it). A chain *starts*
at a closed library call whose data input comes from outside the closed set (the decoded image)
and holds every operation its value reaches.

Samples are the ``__getitem__`` calls of the traced batch. Where the dataset's code was not
recorded (its module is excluded from tracing) the operations directly under the DataLoader's
``__next__`` are split into samples by their dataflow. Chains of different samples that start at
the same place (the same enclosing functions and the same call of the entry function within the
sample) form one :class:`ChainCandidate`; each sample keeps its own steps and recorded arguments,
so calibration replays exactly the variety the batch had (a flip taken by some samples only,
per-sample warp matrices, ragged input sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codedag.graph.model import ExecutionDAG
from codedag.optimize.samples import is_operation, sample_count, traced_samples
from codedag.util.context_keys import split_segment

LIBRARY = "library"
ELEMENTWISE = "elementwise"
VIEW = "view"
TENSOR = "tensor"

OPERATORS = frozenset(
    {
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
        "iadd", "isub", "imul", "itruediv", "ifloordiv", "lt", "le", "gt", "ge", "eq", "ne",
    }
)  # fmt: skip
"""``operator.*`` steps a deferred array records (NumPy ufuncs through ``__array_ufunc__``)."""

VIEWS = frozenset(
    {
        "numpy.ndarray.astype", "numpy.ndarray.copy", "numpy.copy", "numpy.asarray",
        "numpy.asanyarray", "numpy.ascontiguousarray", "numpy.array", "numpy.ndarray.transpose",
        "numpy.transpose", "numpy.ndarray.T", "numpy.ndarray.reshape", "numpy.reshape",
        "operator.getitem", "numpy.flip", "numpy.fliplr", "numpy.flipud", "numpy.clip",
        "numpy.ndarray.clip",
    }
)  # fmt: skip
"""NumPy views, casts and constructors a deferred array records."""

TO_TENSOR = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor"})
TENSOR_METHODS = frozenset(
    {
        "float", "double", "half", "int", "long", "byte", "to", "clone", "contiguous", "permute",
        "unsqueeze", "squeeze", "transpose", "flip", "movedim", "add", "sub", "mul", "div",
        "true_divide", "clamp", "clip", "neg", "abs",
    }
)  # fmt: skip
TENSOR_OWNERS = ("torch.Tensor", "torch._C.TensorBase")
"""Where the tracer finds a tensor's methods: ``torch.Tensor``'s own, or its C base's
(``torch._C.TensorBase.permute``); a chain names both ``torch.Tensor.<method>``."""
METADATA = frozenset(
    {"numpy.ndarray.shape", "numpy.ndarray.dtype", "numpy.ndarray.ndim", "numpy.ndarray.size"}
)
"""Attribute reads a deferred value answers without computing: consumers that never force."""

NUMPY_UFUNCS = frozenset(
    {
        "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "negative",
        "power", "sqrt", "exp", "log", "log1p", "abs", "absolute", "maximum", "minimum",
        "square", "sin", "cos", "tanh", "floor", "ceil", "rint",
    }
)  # fmt: skip


def _step_name(name: str) -> str:
    """A traced call's name in a chain: a tensor method as ``torch.Tensor.<method>``, wherever
    torch defines it, as batched execution and its calibration name it."""
    module, _, short = name.rpartition(".")
    return f"torch.Tensor.{short}" if module in TENSOR_OWNERS else name


def step_kind(name: str, library: Callable[[str], bool]) -> str | None:
    """What a deferred value makes of an operation named ``name`` (``None``: it forces).

    Args:
        name: canonical name of a call or step (``cv2.resize``, ``operator.truediv``).
        library: whether a library function has a batch-first backend.
    """
    if name in VIEWS:
        return VIEW
    if name in TO_TENSOR:
        return TENSOR
    module, _, short = name.rpartition(".")
    if module == "operator" and short in OPERATORS:
        return ELEMENTWISE
    if module == "numpy" and short in NUMPY_UFUNCS:
        return ELEMENTWISE
    if module in TENSOR_OWNERS and short in TENSOR_METHODS:
        return TENSOR
    if library(name):
        return LIBRARY
    return None


@dataclass(frozen=True)
class ChainStep:
    """One operation of one sample's chain, as traced.

    Attributes:
        call_id: its node in the DAG.
        name: canonical name.
        kind: ``library``, ``elementwise``, ``view`` or ``tensor``.
        args: recorded argument descriptions (``None``: not recorded).
        data_slot: the argument entry that received the chain's value (``None``: the receiver
            of a method recorded without arguments, or not known).
        out_shape: shape of its result (``None``: not recorded).
        out_dtype: dtype of its result (``None``: not recorded).
        context_key: its context key.
        operands: shape and dtype of each data value the step reads that the chain did not make
            (``mean`` and ``std`` arrays in ``(x - mean) / std``), in the order it reads them;
            what calibration needs to replay an operator the trace kept no operands of.
    """

    call_id: int
    name: str
    kind: str
    args: list[dict[str, Any]] | None
    data_slot: str | None
    out_shape: tuple[int, ...] | None
    out_dtype: str | None
    context_key: str
    operands: tuple[tuple[tuple[int, ...], str], ...] = ()


@dataclass
class SampleChain:
    """The chain of one traced sample."""

    sample: int
    steps: list[ChainStep]

    @property
    def names(self) -> tuple[str, ...]:
        """The step names in order."""
        return tuple(s.name for s in self.steps)


@dataclass
class ChainCandidate:
    """Chains of several samples that start at the same place of ``__getitem__``.

    Attributes:
        id: ``chain0``, ``chain1``, ... in order of the first sample's entry call.
        entry_function: the library function that starts the chain.
        samples: each traced sample's chain.
        steps: every operation name, in order (steps only some samples take included).
        functions: library functions of the chain (patched while it runs batched).
        entries: context keys of the entry calls.
    """

    id: str
    entry_function: str
    samples: list[SampleChain] = field(default_factory=list)

    @property
    def steps(self) -> list[str]:
        """Operation names of all samples merged in order."""
        merged: list[str] = []
        for sample in self.samples:
            position = 0
            for name in sample.names:
                if name in merged[position:]:
                    position = merged.index(name, position) + 1
                else:
                    merged.insert(position, name)
                    position += 1
        return merged

    @property
    def functions(self) -> list[str]:
        """Library functions of the chain."""
        return sorted({s.name for c in self.samples for s in c.steps if s.kind == LIBRARY})

    @property
    def entries(self) -> list[str]:
        """Context keys of the entry calls."""
        return [c.steps[0].context_key for c in self.samples if c.steps[0].context_key]


@dataclass
class ChainsFound:
    """What :func:`find_chains` found: the candidates and why there may be none."""

    candidates: list[ChainCandidate]
    samples: int
    note: str = ""


def _consumers(dag: ExecutionDAG, node_id: int, inside: set[int]) -> list[int]:
    out = set()
    for value in dag.successors(node_id, "produces"):
        for consumer in dag.successors(value, "uses"):
            if consumer in inside and consumer != node_id:
                out.add(consumer)
    return sorted(out)


def _producers(dag: ExecutionDAG, node_id: int, inside: set[int]) -> set[int]:
    out = set()
    for value in dag.predecessors(node_id, "uses"):
        for producer in dag.predecessors(value, "produces"):
            if producer in inside:
                out.add(producer)
    return out


def _value_of(dag: ExecutionDAG, node_id: int) -> Any:
    """The value node a call produced (the first data value), or ``None``."""
    for value in dag.successors(node_id, "produces"):
        node = dag.nodes[value]
        if getattr(node, "shape", None) is not None:
            return node
    return None


def _data_slot(dag: ExecutionDAG, node: Any, chain: set[int]) -> str | None:
    """The argument entry of ``node`` that received a value made by the chain."""
    if node.args is None:
        return None
    fed = [
        dag.value(v)
        for v in dag.predecessors(node.id, "uses")
        if any(p in chain for p in dag.predecessors(v, "produces"))
    ]
    arrays = [e for e in node.args if e.get("kind") == "array"]
    for value in fed:
        for entry in arrays:
            if list(entry.get("shape") or []) == list(value.shape or []) and (
                value.dtype is None or str(entry.get("dtype")) == str(value.dtype)
            ):
                return str(entry.get("name"))
    return str(arrays[0].get("name")) if len(arrays) == 1 else None


def find_chains(
    dag: ExecutionDAG,
    library: Callable[[str], bool] | None = None,
    allowed: Callable[[Any], bool] | None = None,
) -> ChainsFound:
    """The chains of deferrable operations of each traced sample, grouped across samples.

    Args:
        dag: the traced :class:`~codedag.graph.ExecutionDAG` (a coarsened DAG's ``source`` too).
        library: whether a library function has a batch-first backend (default: the batched
            backends' registry view).
        allowed: whether a library call may join a chain (placement's semantic and user rules:
            random draws, output buffers, ``--exclude``); default: every call.
    """
    dag = getattr(dag, "source", dag)
    library = library or _default_library()
    allowed = allowed or (lambda _node: True)
    samples = traced_samples(dag)
    if not samples:
        return ChainsFound([], 0, "the trace holds no DataLoader samples (__getitem__ calls)")
    groups: dict[tuple[Any, ...], ChainCandidate] = {}
    for index, ops in enumerate(samples):
        for key, chain in _sample_chains(dag, ops, index, library, allowed):
            candidate = groups.get(key)
            if candidate is None:
                candidate = ChainCandidate(f"chain{len(groups)}", chain.steps[0].name)
                groups[key] = candidate
            candidate.samples.append(chain)
    found = list(groups.values())
    note = "" if found else "no sample has a chain of calls that batched execution can defer"
    return ChainsFound(found, sample_count(dag, samples), note)


def _sample_chains(
    dag: ExecutionDAG,
    ops: list[Any],
    index: int,
    library: Callable[[str], bool],
    allowed: Callable[[Any], bool],
) -> list[tuple[tuple[Any, ...], SampleChain]]:
    operations = [n for n in ops if is_operation(n) and n.name not in METADATA]
    inside = {n.id for n in operations}
    kinds = {n.id: step_kind(n.name, library) for n in operations}
    closed: set[int] = set()
    for node in sorted(operations, key=lambda n: -n.id):  # consumers first (ids are topological)
        kind = kinds[node.id]
        if kind is None or (kind == LIBRARY and not allowed(node)):
            continue
        if all(c in closed for c in _consumers(dag, node.id, inside)):
            closed.add(node.id)
    out = []
    seen_entries: dict[tuple[Any, ...], int] = {}
    for node in operations:
        if node.id not in closed or kinds[node.id] != LIBRARY:
            continue
        if _producers(dag, node.id, inside) & closed:
            continue  # fed by the chain: not a start
        members = {node.id}
        frontier = [node.id]
        while frontier:
            current = frontier.pop()
            for consumer in _consumers(dag, current, inside):
                if consumer in closed and consumer not in members:
                    members.add(consumer)
                    frontier.append(consumer)
        steps = []
        for member in sorted(members):
            call = dag.call(member)
            value = _value_of(dag, member)
            steps.append(
                ChainStep(
                    call_id=member,
                    name=_step_name(call.name),
                    kind=kinds[member] or "",
                    args=call.args,
                    data_slot=_data_slot(dag, call, members - {member})
                    if member != node.id
                    else _entry_slot(call),
                    out_shape=tuple(value.shape) if value is not None and value.shape else None,
                    out_dtype=str(value.dtype) if value is not None and value.dtype else None,
                    context_key=call.context_key,
                    operands=_outside_operands(dag, member, members),
                )
            )
        where = _enclosing(dag, node)
        ordinal = seen_entries.get((where, node.name), 0)
        seen_entries[(where, node.name)] = ordinal + 1
        out.append(((where, node.name, ordinal), SampleChain(index, steps)))
    return out


def _outside_operands(
    dag: ExecutionDAG, node_id: int, chain: set[int]
) -> tuple[tuple[tuple[int, ...], str], ...]:
    """Shape and dtype of each data value ``node_id`` reads that no call of ``chain`` made."""
    found = []
    for v in dag.predecessors(node_id, "uses"):
        if any(p in chain for p in dag.predecessors(v, "produces")):
            continue
        value = dag.value(v)
        if value.shape is not None and value.dtype:
            found.append((tuple(int(d) for d in value.shape), str(value.dtype)))
    return tuple(found)


def _entry_slot(call: Any) -> str | None:
    for entry in call.args or ():
        if entry.get("kind") == "array":
            return str(entry.get("name"))
    return None


def _enclosing(dag: ExecutionDAG, node: Any) -> tuple[str, ...]:
    """Names of the user functions between the sample and the call (no per-sample counters)."""
    names = [split_segment(segment)[0] for segment in node.context_key.split("/")[:-1]]
    # Keep what lies inside the sample: after the last __getitem__ (or __next__) segment.
    for marker in ("__getitem__", "__getitems__", "__next__"):
        hits = [i for i, n in enumerate(names) if n.endswith(marker)]
        if hits:
            return tuple(names[hits[-1] + 1 :])
    return tuple(names)


def _default_library() -> Callable[[str], bool]:
    from codedag.backends.batched.backends import backend_for

    def library(name: str) -> bool:
        try:
            backend = backend_for(name)
        except Exception:  # a registry that cannot build this backend: not deferrable
            return False
        return backend is not None and backend.batch_first and bool(backend.data)

    return library
