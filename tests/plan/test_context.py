"""Context keys: normalization and the exact / suffix / function-name matching rule."""

from __future__ import annotations

import pytest

from codedag.plan.context import ContextMatcher, function_of, normalize_key, split_segment

NEXT = "torch.utils.data.dataloader._BaseDataLoaderIter.__next__"
GET = "app.data.DS.__getitem__"


def test_normalize_drops_outer_counters_keeps_own() -> None:
    key = f"{NEXT}#0/{GET}#5/cv2.resize#1"
    norm = normalize_key(key)
    assert norm.parents == (NEXT, GET)
    assert (norm.name, norm.counter) == ("cv2.resize", 1)
    assert function_of(key) == "cv2.resize"
    assert split_segment("numpy.clip") == ("numpy.clip", 0)
    with pytest.raises(ValueError):
        normalize_key("///")


def test_per_sample_keys_collapse_to_one_constant_placement() -> None:
    entries = [(f"{NEXT}#0/{GET}#{i}/cv2.resize#0", "cpu") for i in range(64)]
    matcher = ContextMatcher("cv2.resize", entries)
    assert matcher.constant and matcher.default == "cpu"
    assert len(matcher.keys) == 1
    # A later batch (other sample counters, other process stack) gets the same answer.
    assert matcher.match(("worker_loop", "fetch", GET), 0)[0] == "cpu"


def test_levels_exact_suffix_name() -> None:
    entries = [
        (f"{NEXT}#0/{GET}#3/cv2.resize#0", "cuda:0"),
        (f"{NEXT}#0/{GET}#3/cv2.resize#1", None),
        (f"{NEXT}#0/app.collate#0/cv2.resize#0", None),
    ]
    matcher = ContextMatcher("cv2.resize", entries)
    assert not matcher.constant
    # exact: the whole plan key matches, extra outer frames are fine
    assert matcher.match(("main", "train", NEXT, GET), 0) == ("cuda:0", "exact")
    # own counter separates the first and the second resize of one __getitem__
    assert matcher.match(("main", NEXT, GET), 1) == (None, "exact")
    # suffix: a DataLoader worker has no __next__ above __getitem__
    assert matcher.match(("worker_loop", "fetch", GET), 0) == ("cuda:0", "suffix")
    # frames the tracer filtered out between the segments do not break the match
    assert matcher.match((NEXT, "helper", GET, "decorator.inner"), 0)[1] == "exact"
    # name: a context the plan never saw takes the majority placement (None here: 2 of 3)
    assert matcher.match(("somewhere", "else"), 7) == (None, "name")


def test_conflicting_samples_use_the_majority() -> None:
    entries = [(f"{NEXT}#0/{GET}#{i}/numpy.clip#0", "cpu" if i < 5 else None) for i in range(8)]
    matcher = ContextMatcher("numpy.clip", entries)
    assert matcher.conflicts == 1
    assert matcher.constant  # one normalized key: its majority decides
    assert matcher.match((GET,), 0)[0] == "cpu"


def test_decided_by_caller() -> None:
    entries = [
        (f"{NEXT}#0/{GET}#0/numpy.clip#0", "cpu"),
        (f"{NEXT}#0/app.collate#0/numpy.clip#0", None),
        (f"{NEXT}#0/app.collate#0/numpy.clip#1", "cpu"),
    ]
    matcher = ContextMatcher("numpy.clip", entries)
    assert matcher.decided_by_caller(GET)
    assert not matcher.decided_by_caller("app.collate")  # depends on the counter
    assert not matcher.decided_by_caller("unknown")


def test_innermost_names_and_frame_names() -> None:
    import sys

    from codedag.plan.context import frame_name

    entries = [
        (f"{NEXT}#0/{GET}#0/numpy.clip#0", "cpu"),
        ("app.collate#0/numpy.clip#0", None),
        ("numpy.clip#0", "cpu"),  # a top-level call: no enclosing name
    ]
    matcher = ContextMatcher("numpy.clip", entries)
    assert matcher.innermost == frozenset({GET, "app.collate"})
    here = sys._getframe()
    assert frame_name(here) == f"{__name__}.test_innermost_names_and_frame_names"
    assert frame_name(here) is frame_name(here)  # cached by the code object's identity


def test_a_spawned_workers_copy_of_the_main_script_has_the_main_scripts_names() -> None:
    """A worker started with spawn or forkserver imports the script as ``__mp_main__``: its data
    set's ``__getitem__`` must keep the name the plan traced (``__main__....``)."""
    import sys

    from codedag.plan.context import frame_name

    for module in ("__mp_main__", "__main__"):
        scope: dict[str, object] = {"__name__": module, "sys": sys}
        exec("class Images:\n    def get(self):\n        return sys._getframe()\n", scope)
        frame = scope["Images"]().get()  # type: ignore[operator]
        assert frame_name(frame) == "__main__.Images.get"
