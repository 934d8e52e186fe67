"""A prefix cut's bytes weighed against the compute they spare (figures constructed, no timing)."""

from __future__ import annotations

from collections.abc import Callable

from codedag.optimize.cache import PrefixChain, PrefixFound, Step, TracedChain, decide
from codedag.optimize.cache_bytes import later_pays, smaller_value

FLOAT = 416 * 416 * 3 * 4
UINT8 = 416 * 416 * 3
STEPS = (  # decode -> resize -> astype(float32) / 255, per source: name, traced ns, bytes, dtype
    ("numpy.frombuffer", 10_000, 20_000, "uint8"),
    ("cv2.imdecode", 2_000_000, 600 * 400 * 3, "uint8"),
    ("cv2.resize", 500_000, UINT8, "uint8"),
    ("numpy.ndarray.astype", 400_000, FLOAT, "float32"),
    ("operator.truediv", 600_000, FLOAT, "float32"),
)


def _found(sources: int = 4, calls: tuple[tuple[str, int, int, str], ...] = STEPS) -> PrefixFound:
    chain = PrefixChain("prefix0", "numpy.frombuffer", "data.Images.__getitem__")
    for sample in range(sources):
        steps = [
            Step(100 * sample + i, name, 0, ns, nbytes, (nbytes,), dtype, f"k{i}")
            for i, (name, ns, nbytes, dtype) in enumerate(calls)
        ]
        chain.traced.append(TracedChain(sample, chain.caller, "0", "buffer", steps, "output"))
    return PrefixFound([chain], sources, sources)


def _per_byte(read: float, write: float) -> Callable[[int], tuple[int, int]]:
    """A store whose costs are a fixed 20 us plus a cost per byte, read and write."""
    return lambda nbytes: (20_000 + int(read * nbytes), 20_000 + int(write * nbytes))


def test_the_cut_moves_back_to_the_uint8_value_when_its_bytes_cost_more_than_the_cast() -> None:
    cheap = decide(_found(), _per_byte(0.1, 0.2), budget_bytes=1 << 30)
    (chain,) = cheap.chains
    assert chain.cut is not None and chain.cut.step == "operator.truediv"
    assert chain.cut.bytes_per_sample == FLOAT
    # the 1 ms of calls after the resize cost more than 4x the bytes add to a read
    assert "not at cv2.resize's 4x smaller value (0.519 MB uint8)" in chain.reason
    assert "the calls after it take 1 ms traced" in chain.reason

    dear = decide(_found(), _per_byte(1.0, 0.5), budget_bytes=1 << 30)
    (chain,) = dear.chains
    assert chain.cached and chain.cut is not None and chain.cut.step == "cv2.resize"
    assert chain.cut.bytes_per_sample == UINT8 and chain.cut.dtype == "uint8"
    assert "before operator.truediv's 4x larger value (2.08 MB float32)" in chain.reason
    assert dear.bytes_total == UINT8 * 4


def test_the_smaller_value_is_the_fewest_bytes_before_the_cut_that_saves_time() -> None:
    section = decide(_found(), _per_byte(0.1, 0.2), budget_bytes=1 << 30)
    (chain,) = section.chains
    assert chain.cut is not None
    small = smaller_value(chain.candidates, chain.cut, 0.1)
    # the 20 KB buffer is smaller, but reading it back costs more than its traced 10 us
    assert small is not None and small.step == "cv2.resize"
    assert later_pays(small, chain.cut, 10)
    assert smaller_value(chain.candidates, small, 0.1) is None


def test_plan_explains_cache_line_says_why_the_cut_sits_where_it_does() -> None:
    from codedag.optimize.explain import section_lines
    from codedag.plan import MigrationPlan

    section = decide(_found(), _per_byte(1.0, 0.5), budget_bytes=1 << 30)
    plan = MigrationPlan.from_dict(
        {"context_device_map": {}, "cache": section.model_dump(mode="json")}
    )
    (line,) = [line for line in section_lines(plan) if line.startswith("cache:")]
    assert line.startswith("cache: applied: 1 chain(s) cached, 2.1 MB")
    assert "; prefix0 cut after cv2.resize (0.519 MB uint8): before operator.truediv's 4x" in line


def _parts(samples: int, dataset_len: int) -> PrefixFound:
    """Two chains of one data set's two parts (a ``ConcatDataset``): each ran in half the
    traced samples."""
    chains = []
    for part in range(2):
        chain = PrefixChain(f"prefix{part}", "numpy.frombuffer", f"data.Part{part}.__getitem__")
        for sample in range(part, samples, 2):
            steps = [
                Step(100 * sample + i, name, 0, ns, nbytes, (nbytes,), dtype, f"k{i}")
                for i, (name, ns, nbytes, dtype) in enumerate(STEPS)
            ]
            chain.traced.append(TracedChain(sample, chain.caller, "0", "buffer", steps, "output"))
        chains.append(chain)
    return PrefixFound(chains, samples, dataset_len)


def test_chains_of_a_data_sets_parts_each_count_their_share_of_its_samples() -> None:
    """A budget that holds one value per sample of the data set holds both parts' values:
    each part's chain stores half the data set's samples, not all of them."""
    dear = _per_byte(1.0, 0.5)  # the cut is resize's uint8 value
    section = decide(_parts(4, 100), dear, budget_bytes=UINT8 * 100)
    assert [c.cut.step if c.cut else None for c in section.chains] == ["cv2.resize"] * 2
    assert [c.share for c in section.chains] == [1.0, 1.0]
    assert all("for 50 sources" in c.reason for c in section.chains)
    assert section.bytes_total == UINT8 * 100


def test_a_cut_that_pays_by_a_thin_margin_gives_way_to_one_that_surely_pays() -> None:
    """The float value pays for its write with 78 % of its compute spent storing and reading it
    back: the run time, measuring a first epoch that shares the cores, may find it does not and
    cache nothing. The uint8 value before the cast, 28 %, is kept though worth a little less."""
    section = decide(_found(), _per_byte(0.5, 0.8), budget_bytes=1 << 30)
    (chain,) = section.chains
    assert chain.cut is not None and chain.cut.step == "cv2.resize"
    assert "not at operator.truediv's value (2.08 MB float32)" in chain.reason
    assert "would take 78% of the 3.51 ms computing it does" in chain.reason
    truediv = next(c for c in chain.candidates if c.step == "operator.truediv")
    assert truediv.write_ns <= truediv.saved_ns  # it pays, by the plain rule


def test_a_thin_margin_stays_where_the_sure_cut_is_worth_less_than_half() -> None:
    """A cheap decode then a costly float transform: the uint8 value is sure to pay but saves
    little, so the float value stays the cut and the run time judges its margin."""
    calls = (
        ("numpy.frombuffer", 10_000, 20_000, "uint8"),
        ("cv2.imdecode", 1_190_000, UINT8, "uint8"),
        ("numpy.ndarray.astype", 2_500_000, FLOAT, "float32"),
    )
    section = decide(_found(calls=calls), _per_byte(0.5, 0.5), budget_bytes=1 << 30)
    (chain,) = section.chains
    assert chain.cut is not None and chain.cut.step == "numpy.ndarray.astype"
    assert "surely pays" not in chain.reason
    decode = next(c for c in chain.candidates if c.step == "cv2.imdecode")
    assert decode.write_ns + decode.read_ns < decode.prefix_ns / 2  # sure, but worth too little
    assert chain.cut.write_ns + chain.cut.read_ns > chain.cut.prefix_ns / 2
