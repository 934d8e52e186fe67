"""Read-only views whose contents come from a source function at each access."""

from __future__ import annotations

from codedag.backends.derived import MappingView, SequenceView, SetView


def _counting(value: object) -> tuple[list[int], object]:
    reads: list[int] = []

    def source() -> object:
        reads.append(1)
        return value

    return reads, source


def test_mapping_view_reads_its_source_at_every_access() -> None:
    data = {"a": 1}
    reads, source = _counting(data)
    view: MappingView[str, int] = MappingView(source)  # type: ignore[arg-type]
    assert reads == []  # nothing computed at construction
    assert view["a"] == 1 and "a" in view and len(view) == 1
    data["b"] = 2  # a source read anew shows new contents
    assert dict(view) == {"a": 1, "b": 2}
    assert view.get("c") is None
    assert repr(view) == "MappingView({'a': 1, 'b': 2})"
    assert len(reads) >= 4


def test_sequence_view_indexes_slices_and_searches() -> None:
    items = [3, 1, 2]
    view: SequenceView[int] = SequenceView(lambda: items)
    assert view[0] == 3 and list(view[1:]) == [1, 2]
    assert len(view) == 3 and 2 in view and 9 not in view
    assert view.index(2) == 2
    items.append(9)
    assert list(view) == [3, 1, 2, 9]
    assert repr(view) == "SequenceView((3, 1, 2, 9))"


def test_set_view_combines_into_frozensets() -> None:
    items = {"x", "y"}
    view: SetView[str] = SetView(lambda: items)
    assert "x" in view and len(view) == 2
    union = view | {"z"}
    assert union == frozenset({"x", "y", "z"}) and isinstance(union, frozenset)
    assert view & {"y", "q"} == frozenset({"y"})
    assert view - {"x"} == frozenset({"y"})
    assert view == {"x", "y"}
    assert repr(view).startswith("SetView(")
