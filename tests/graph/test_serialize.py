"""The DAG's JSON node form: round trips, the fast path for well-typed dicts, one clear error
per malformed dict, and older files' missing fields taking their defaults."""

from __future__ import annotations

import pytest

from codedag.errors import SchemaError
from codedag.graph.nodes import CallNode, ValueNode
from codedag.graph.serialize import call_dict, fast_node, node_from_dict, value_dict

CALL = CallNode(3, "cv2.resize", "f#0/cv2.resize#0", "a.py:4", 1, 900, 800, 64, ["x"], "y", True)
VALUE = ValueNode(4, "ndarray", 1, "numpy.ndarray", [2, 3], "uint8", 6, "cpu")


def test_nodes_round_trip_through_both_parsers() -> None:
    for node, as_dict in ((CALL, call_dict(CALL)), (VALUE, value_dict(VALUE))):
        assert fast_node(as_dict) == node
        assert node_from_dict(as_dict) == node


def test_the_fast_path_declines_anything_it_cannot_vouch_for() -> None:
    wrong_type = {**call_dict(CALL), "depth": "1"}
    assert fast_node(wrong_type) is None
    missing = value_dict(VALUE)
    del missing["device"]
    assert fast_node(missing) is None
    assert fast_node([1, 2]) is None and fast_node({"kind": "edge"}) is None


def test_the_checked_parser_names_what_is_wrong() -> None:
    with pytest.raises(SchemaError, match="field 'depth' is str; expected int"):
        node_from_dict({**call_dict(CALL), "depth": "1"})
    with pytest.raises(SchemaError, match="kind 'edge' is unknown"):
        node_from_dict({"kind": "edge", "id": 1})
    with pytest.raises(SchemaError, match="missing required field 'name'"):
        node_from_dict({"kind": "value", "id": 1})
    with pytest.raises(SchemaError, match="expected an object, got list"):
        node_from_dict([])


def test_a_steps_merged_operations_round_trip_and_are_checked() -> None:
    step = CallNode(5, "operator.truediv", operations=["operator.sub", "operator.truediv"])
    assert "operations" not in call_dict(CALL)  # written only where a step merges several
    assert node_from_dict(call_dict(step)) == step
    for spoiled in ([1], ["x" * 600], ["operator.add"] * 300):
        with pytest.raises(SchemaError, match="field 'operations' is not a list of at most"):
            node_from_dict({**call_dict(step), "operations": spoiled})


def test_fields_missing_from_older_files_take_their_defaults() -> None:
    node = node_from_dict({"kind": "value", "id": 7, "name": "Tensor"})
    assert node == ValueNode(7, "Tensor")
