"""JSON form of the execution DAG: node dicts, fast and checked parsing, GC pausing."""

from __future__ import annotations

from typing import Any

from codedag.errors import SchemaError
from codedag.graph.nodes import CallNode, Node, ValueNode

# Field name -> accepted JSON types, per node class (for from_dict validation).
FIELD_TYPES: dict[type, dict[str, tuple[type, ...]]] = {
    CallNode: {
        "id": (int,),
        "name": (str,),
        "context_key": (str,),
        "call_site": (str,),
        "depth": (int,),
        "total_ns": (int,),
        "self_ns": (int,),
        "mem_bytes": (int,),
        "arg_summaries": (list,),
        "return_summary": (str, type(None)),
        "is_builtin": (bool,),
        "args": (list, type(None)),
        "operations": (list,),
    },
    ValueNode: {
        "id": (int,),
        "name": (str,),
        "version": (int,),
        "type_name": (str,),
        "shape": (list, type(None)),
        "dtype": (str, type(None)),
        "nbytes": (int,),
        "device": (str,),
    },
}
KIND_CLASS: dict[str, type] = {"call": CallNode, "value": ValueNode}
MAX_OPERATIONS = 256
"""The most operations a step's ``operations`` may name (a statement's merged operators)."""
MAX_NAME_CHARS = 512
"""The longest name ``operations`` may hold."""


def node_from_dict(raw: Any) -> Node:
    if not isinstance(raw, dict):
        raise SchemaError(f"expected an object, got {type(raw).__name__}")
    kind = raw.get("kind")
    cls = KIND_CLASS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SchemaError(f"kind {kind!r} is unknown; expected 'call' or 'value'")
    types = FIELD_TYPES[cls]
    kwargs = {}
    for name, accepted in types.items():
        if name not in raw:
            if name in ("id", "name"):
                raise SchemaError(f"missing required field {name!r}")
            continue  # older files: the dataclass default applies
        value = raw[name]
        if type(value) not in accepted:
            raise SchemaError(
                f"field {name!r} is {type(value).__name__}; expected "
                f"{' or '.join(t.__name__ for t in accepted)}"
            )
        kwargs[name] = value
    operations = kwargs.get("operations")
    if operations is not None and (
        len(operations) > MAX_OPERATIONS
        or not all(type(o) is str and len(o) <= MAX_NAME_CHARS for o in operations)
    ):
        raise SchemaError(
            f"field 'operations' is not a list of at most {MAX_OPERATIONS} names (strings of "
            f"at most {MAX_NAME_CHARS} characters)"
        )
    return cls(**kwargs)


def call_dict(n: CallNode) -> dict[str, Any]:
    """The JSON form of a call node (``operations`` only where a step merges several)."""
    out = {
        "id": n.id,
        "kind": "call",
        "name": n.name,
        "context_key": n.context_key,
        "call_site": n.call_site,
        "depth": n.depth,
        "total_ns": n.total_ns,
        "self_ns": n.self_ns,
        "mem_bytes": n.mem_bytes,
        "arg_summaries": n.arg_summaries,
        "return_summary": n.return_summary,
        "is_builtin": n.is_builtin,
        "args": n.args,
    }
    if n.operations:
        out["operations"] = n.operations
    return out


def value_dict(n: ValueNode) -> dict[str, Any]:
    return {
        "id": n.id,
        "kind": "value",
        "name": n.name,
        "version": n.version,
        "type_name": n.type_name,
        "shape": n.shape,
        "dtype": n.dtype,
        "nbytes": n.nbytes,
        "device": n.device,
    }


def fast_node(raw: Any) -> Node | None:
    """The node of a complete, well-typed current-format dict; None means: check it slowly."""
    if type(raw) is not dict:
        return None
    kind = raw.get("kind")
    try:
        if kind == "call" and len(raw) == 13:
            node_id, ret = raw["id"], raw["return_summary"]
            call = CallNode(
                node_id,
                raw["name"],
                raw["context_key"],
                raw["call_site"],
                raw["depth"],
                raw["total_ns"],
                raw["self_ns"],
                raw["mem_bytes"],
                raw["arg_summaries"],
                ret,
                raw["is_builtin"],
                raw["args"],
            )
            ok = (
                type(node_id) is int
                and type(call.name) is str
                and type(call.context_key) is str
                and type(call.call_site) is str
                and type(call.depth) is int
                and type(call.total_ns) is int
                and type(call.self_ns) is int
                and type(call.mem_bytes) is int
                and type(call.arg_summaries) is list
                and (ret is None or type(ret) is str)
                and type(call.is_builtin) is bool
                and (call.args is None or type(call.args) is list)
            )
            return call if ok else None
        if kind == "value" and len(raw) == 9:
            node_id, shape, dtype = raw["id"], raw["shape"], raw["dtype"]
            value = ValueNode(
                node_id,
                raw["name"],
                raw["version"],
                raw["type_name"],
                shape,
                dtype,
                raw["nbytes"],
                raw["device"],
            )
            ok = (
                type(node_id) is int
                and type(value.name) is str
                and type(value.version) is int
                and type(value.type_name) is str
                and (shape is None or type(shape) is list)
                and (dtype is None or type(dtype) is str)
                and type(value.nbytes) is int
                and type(value.device) is str
            )
            return value if ok else None
    except KeyError:
        return None
    return None
