"""Turn a session's raw records into an :class:`ExecutionDAG`: ids, times, context keys, edges."""

from __future__ import annotations

import contextlib
import functools
import heapq
import os
import sys
from typing import TYPE_CHECKING, Any

from codedag.graph.model import CallNode, ExecutionDAG, ValueNode
from codedag.trace.args import describe_arguments, parameter_defaults
from codedag.trace.costs import Calibration, CostModel
from codedag.trace.records import (
    ARG_CONTAINER,
    ARG_OBJ,
    ARG_SCALAR,
    ARG_SMALL,
    ARG_TYPE,
    ARG_VALUE,
    ARGS,
    DEPTH,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_STEP,
    LIB,
    MEM,
    NAME,
    PARENT,
    RET,
    SEQ,
    SITE,
)
from codedag.trace.value_nodes import format_dtype, format_shape, short_repr, value_summary
from codedag.util.gc_pause import gc_paused

if TYPE_CHECKING:
    from codedag.trace.session_state import SessionState


class DAGBuilder:
    """Holds the DAG of the last tracing window (``tracer.dag_builder.dag``) and builds it."""

    def __init__(self) -> None:
        self.dag = ExecutionDAG()
        self._versions: dict[str, int] = {}

    # The original incremental API, for building DAGs by hand (tests, other front ends).
    def add_function_node(self, name: str, context: str = "", **fields: Any) -> int:
        """Add a call node named ``name`` with context key ``context``; return its id."""
        return self.dag.add_call(name=name, context_key=context, **fields)

    def add_variable_node(self, name: str, version: int | None = None, **fields: Any) -> int:
        """Add a value node; without ``version`` the next SSA version of ``name`` is used."""
        if version is None:
            version = self._versions.get(name, -1) + 1
        self._versions[name] = max(version, self._versions.get(name, -1))
        return self.dag.add_value(name=name, version=version, **fields)

    def add_edge(self, source: int, target: int, edge_type: str) -> None:
        """Add an edge (``calls``, ``uses`` or ``produces``)."""
        self.dag.add_edge(source, target, edge_type)

    def build(
        self, session: SessionState, calibration: Calibration, metadata: dict[str, Any]
    ) -> ExecutionDAG:
        """Build the DAG from ``session``'s records and keep it as ``self.dag``."""
        with gc_paused():  # only acyclic objects are made here; GC passes would only slow it down
            dag = _Build(session, calibration).dag(metadata)
        self.dag = dag
        return dag


class _Build:
    """One DAG built from one window's records (records are freed as nodes are made)."""

    def __init__(self, session: SessionState, calibration: Calibration) -> None:
        self.session = session
        self.calls = session.calls
        self.value_by_seq = {v[0]: v for v in session.values}
        self.step_uses = _step_inputs(self.calls, session.uses)
        weights = _step_weights(self.step_uses, session.produces, self.value_by_seq)
        self.totals, self.selfs = CostModel(calibration).times(self.calls, weights)
        self.cwd = os.getcwd() + os.sep
        self.keys: dict[int, str] = {}
        self.counters: dict[tuple[int, str], int] = {}
        self.sites: dict[Any, str] = {}
        self.summaries: dict[Any, str] = {}

    def dag(self, metadata: dict[str, Any]) -> ExecutionDAG:
        """The DAG: nodes in sequence order (calls and values interleaved), then edges."""
        calls, values = self.calls, self.session.values
        dag = ExecutionDAG(metadata=metadata)
        nodes = dag.nodes
        call_edges: list[tuple[int, int, str]] = []
        ci = vi = 0
        n_calls, n_values = len(calls), len(values)
        while ci < n_calls or vi < n_values:
            if vi >= n_values or (ci < n_calls and calls[ci][SEQ] < values[vi][0]):
                rec = calls[ci]
                nodes[rec[SEQ]] = self._call_node(rec, ci)
                if rec[PARENT] >= 0:
                    call_edges.append((rec[PARENT], rec[SEQ], "calls"))
                calls[ci] = None  # type: ignore[call-overload] # free records as nodes are made
                ci += 1
            else:
                v = values[vi]
                nodes[v[0]] = ValueNode(
                    v[0], v[1], v[2], v[3], format_shape(v[4]), format_dtype(v[5]), int(v[6]), v[7]
                )
                vi += 1
        dag._next_id = max(nodes, default=-1) + 1
        edges = dag.edges
        edges.extend(call_edges)
        calls.clear()
        edges.extend((v, c, "uses") for v, c in dict.fromkeys(self.session.uses))
        edges.extend((c, v, "produces") for c, v in dict.fromkeys(self.session.produces))
        if any(src > dst for src, dst, _ in edges):
            _renumber(dag)
        return dag

    def _call_node(self, rec: list[Any], index: int) -> CallNode:
        seq, parent, name = rec[SEQ], rec[PARENT], rec[NAME]
        count = self.counters.get((parent, name), 0)
        self.counters[(parent, name)] = count + 1
        key = f"{self.keys[parent]}/{name}#{count}" if parent >= 0 else f"{name}#{count}"
        self.keys[seq] = key
        raw_site = rec[SITE]  # (code, offset): keyed by id(code), as hashing code is slow
        site_key = (id(raw_site[0]), raw_site[1]) if raw_site is not None else None
        site = self.sites.get(site_key)
        if site is None:
            site = self.sites[site_key] = _site(raw_site, self.cwd)
        raw_args = rec[ARGS]
        if raw_args is None:  # a step of several operations: what it read
            raw_args = [(i, ARG_VALUE, v) for i, v in enumerate(self.step_uses.get(seq, ()))]
        value_by_seq = self.value_by_seq
        path = rec[INFO][2] if rec[KIND] == KIND_STEP else ()
        return CallNode(
            seq,
            name,
            key,
            site,
            rec[DEPTH],
            self.totals[index],
            self.selfs[index],
            rec[MEM],
            [self._summary(arg) for arg in raw_args],
            _ret(rec[RET], value_by_seq),
            rec[KIND] != KIND_PY,
            _arguments(rec, value_by_seq),
            list(path) if len(path) > 1 else [],
        )

    def _summary(self, arg: tuple[Any, int, Any]) -> str:
        """An argument's summary (cached for scalars, types and objects)."""
        if arg[1] == ARG_VALUE or arg[1] == ARG_SMALL:
            return _arg(arg, self.value_by_seq)
        try:
            text = self.summaries.get(arg)
        except TypeError:  # an unhashable scalar payload
            text = None
        if text is None:
            text = _arg(arg, self.value_by_seq)
            with contextlib.suppress(TypeError):
                self.summaries[arg] = text
        return text


def _step_inputs(calls: list[list[Any]], uses: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Values each step read, in order (``{step seq: [value seqs]}``)."""
    steps = {rec[SEQ] for rec in calls if rec[KIND] == KIND_STEP}
    out: dict[int, list[int]] = {}
    if steps:
        for vseq, cseq in uses:
            if cseq in steps:
                out.setdefault(cseq, []).append(vseq)
    return out


def _step_weights(
    step_uses: dict[int, list[int]],
    produces: list[tuple[int, int]],
    value_by_seq: dict[int, list[Any]],
) -> dict[int, int]:
    """Bytes each step produced: a statement's time is shared by its steps in this proportion."""
    out: dict[int, int] = {}
    for cseq, vseq in produces:
        if cseq in step_uses or cseq not in out:
            v = value_by_seq.get(vseq)
            out[cseq] = out.get(cseq, 0) + (int(v[6]) if v is not None else 0)
    return out


def _renumber(dag: ExecutionDAG) -> None:
    """Renumber nodes in a topological order (steps can produce values made before them).

    Kahn's algorithm, taking the smallest old id first: ids keep the creation order wherever
    the edges allow it.
    """
    nodes, edges = dag.nodes, dag.edges
    indegree = dict.fromkeys(nodes, 0)
    succ: dict[int, list[int]] = {}
    for src, dst, _ in edges:
        indegree[dst] += 1
        succ.setdefault(src, []).append(dst)
    ready = [n for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        node_id = heapq.heappop(ready)
        order.append(node_id)
        for nxt in succ.get(node_id, ()):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) != len(nodes):  # a cycle: leave the ids (self_check reports it)
        return
    new_id = {old: new for new, old in enumerate(order)}
    renumbered = {}
    for old in order:
        node = nodes[old]
        node.id = new_id[old]
        renumbered[node.id] = node
    dag.nodes = renumbered
    dag.edges = [(new_id[s], new_id[d], k) for s, d, k in edges]
    dag._next_id = len(order)


def _site(site: Any, cwd: str) -> str:
    if site is None:
        return ""
    code, lasti = site
    filename, line = code.co_filename, _line_of(code, lasti)
    if filename.startswith(cwd):
        filename = filename[len(cwd) :]
    return f"{filename}:{line}"


def _arguments(rec: list[Any], value_by_seq: dict[int, list[Any]]) -> list[dict[str, Any]] | None:
    """``CallNode.args`` of a library call or a one-operation step (else None)."""
    if rec[KIND] == KIND_STEP:
        return None if rec[ARGS] is None else describe_arguments(rec[ARGS], value_by_seq)
    if rec[LIB] is None or rec[KIND] == KIND_C:
        return None
    if rec[KIND] != KIND_PY:
        return describe_arguments(rec[ARGS], value_by_seq)
    return describe_arguments(rec[ARGS], value_by_seq, rec[INFO], parameter_defaults(rec[NAME]))


def _payload(kind: int, payload: Any, value_by_seq: dict[int, list[Any]]) -> str:
    if kind in (ARG_VALUE, ARG_SMALL):
        v = value_by_seq.get(payload if kind == ARG_VALUE else payload[0])
        if v is None:
            return "?"
        if len(v) < 10:
            v.append(_value_summary(v[1], v[4], v[5]))  # once per value
        return str(v[9])
    if kind == ARG_SCALAR:
        return short_text(payload)
    if kind == ARG_OBJ:
        return short_repr(payload)
    if kind == ARG_CONTAINER:
        return f"{payload[0]}[{payload[1]}]"
    if kind == ARG_TYPE:
        return f"<{payload.__name__}>"
    return "?"


_HEAD = 64  # characters of a long str or bytes rendered for its summary (which keeps 57)


def short_text(obj: object) -> str:
    """``short_repr(obj)``, without rendering a long ``str`` or ``bytes`` whole (an encoded
    image passed to ``numpy.frombuffer`` is hundreds of kilobytes)."""
    # repr picks its quotes from the whole text: quotes added to the head make it agree, and
    # fall beyond the cut
    if type(obj) is str and len(obj) > _HEAD:
        head = obj[:_HEAD]
        if "'" in obj:
            head += "'\"" if '"' in obj else "'"
        return short_repr(head)
    if type(obj) is bytes and len(obj) > _HEAD:
        data = obj[:_HEAD]
        if b"'" in obj:
            data += b"'\"" if b'"' in obj else b"'"
        return short_repr(data)
    return short_repr(obj)


_SUMMARIES: dict[tuple[Any, ...], str] = {}


def _value_summary(name: str, shape: object, dtype: object) -> str:
    """:func:`value_summary`, cached: a window has many values of few shapes."""
    try:
        key = (name, shape, dtype)
        text = _SUMMARIES.get(key)
    except TypeError:  # an unhashable shape or dtype
        return value_summary(name, shape, dtype)
    if text is None:
        text = value_summary(name, shape, dtype)
        if len(_SUMMARIES) < 65536:
            _SUMMARIES[key] = text
    return text


def _arg(arg: tuple[Any, int, Any], value_by_seq: dict[int, list[Any]]) -> str:
    label, kind, payload = arg
    text = _payload(kind, payload, value_by_seq)
    return text if isinstance(label, int) else f"{label}={text}"


def _ret(ret: Any, value_by_seq: dict[int, list[Any]]) -> str | None:
    return None if ret is None else _payload(ret[0], ret[1], value_by_seq)


@functools.lru_cache(maxsize=4096)
def _line_table(code: Any) -> list[tuple[int, int, int | None]]:
    return list(code.co_lines())


def _line_of(code: Any, lasti: int) -> int:
    """Source line of the instruction at byte offset ``lasti`` (what ``f_lineno`` would say)."""
    for start, end, line in _line_table(code):
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


def python_info() -> str:
    """``CPython 3.11.9`` for the DAG's metadata."""
    return f"{sys.implementation.name} {sys.version.split()[0]}"
