"""Finding each sample's deterministic prefix in a trace, and choosing its cut."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.optimize.cache import decide, find_prefixes
from codedag.trace.tracer import trace_dataloader

ENCODED = [
    cv2.imencode(".png", np.full((40, 48, 3), i * 20, np.uint8))[1].tobytes() for i in range(4)
]


class Decoded(Dataset):
    """decode, resize, then (optionally) a random draw before a BGR->RGB conversion and a
    brightening by the drawn amount."""

    def __init__(self, draw_before_convert: bool) -> None:
        self.draw = draw_before_convert

    def __len__(self) -> int:
        return len(ENCODED)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.imdecode(np.frombuffer(ENCODED[index], np.uint8), cv2.IMREAD_COLOR)
        image = cv2.resize(image, (32, 32), interpolation=cv2.INTER_LINEAR)
        if self.draw:  # a shift that differs in every sample (the draw's value, out of sight)
            shift = int(np.random.randint(0, 3)) * 4 + index
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
            image = cv2.add(image, (shift, shift, shift, 0))
        else:
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(image))


def _found(draw: bool):  # type: ignore[no-untyped-def]
    tracer, _ = trace_dataloader(DataLoader(Decoded(draw), batch_size=4), warmup=0)
    return find_prefixes(tracer.dag)


@pytest.mark.parametrize("draw", [False, True])
def test_a_random_draw_ends_the_cacheable_prefix_at_a_call_whose_arguments_differ(
    draw: bool,
) -> None:
    found = _found(draw)
    assert found.dataset_len == 4 and found.samples == 4
    (chain,) = found.chains
    assert chain.source_function == "numpy.frombuffer"
    steps = [name for name, _ in chain.common]
    # after the draw, the conversion takes the same arguments in every sample: it stays
    assert steps[:4] == ["numpy.frombuffer", "cv2.imdecode", "cv2.resize", "cv2.cvtColor"]
    if draw:
        assert len(steps) == 4
        assert chain.stop == (
            "cut ends before cv2.add: it follows a random draw "
            "(numpy.random.randint; its arguments differ between samples)"
        )


def test_a_cut_after_a_random_draw_is_weighed_by_the_share_of_samples_expected_to_reach_it() -> (
    None
):
    """After a draw a call may run on some paths only (``if random() < 0.5: flip``): four traced
    samples that all took it say about 5 in 6 samples will, so a later cut must save more than
    that share loses; a cut before the draw is taken where the call after it costs little."""
    found = _found(True)
    (chain,) = found.chains
    costs = lambda nbytes: (1_000, 2_000)  # noqa: E731

    def convert_costs(share: float) -> None:  # the conversion's traced time, of the prefix's
        for traced in chain.traced:
            prefix = sum(s.total_ns for s in traced.steps[:3])
            traced.steps[3] = dataclasses.replace(traced.steps[3], total_ns=int(prefix * share))

    convert_costs(0.1)
    (cheap_step,) = decide(found, costs, budget_bytes=1 << 30).chains
    assert cheap_step.cut is not None and cheap_step.cut.step == "cv2.resize"
    assert "a cut after cv2.cvtColor follows a random draw (numpy.random.randint)" in (
        cheap_step.reason
    )
    assert "weighed as reached by 5 samples in 6, though all 4 traced ones did" in (
        cheap_step.reason
    )
    convert_costs(3)  # now most of the work: worth the risk
    (dear_step,) = decide(found, costs, budget_bytes=1 << 30).chains
    assert dear_step.cut is not None and dear_step.cut.step == "cv2.cvtColor"
    assert "weighed as reached" not in dear_step.reason


class HalvedInline(Dataset):  # type: ignore[type-arg]
    """A resize to half the decoded size, written inline: the size tuple reads the image's
    ``shape``, which tells its size, not its pixels."""

    def __len__(self) -> int:
        return len(ENCODED)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.imdecode(np.frombuffer(ENCODED[index], np.uint8), cv2.IMREAD_COLOR)
        image = cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2))
        return torch.from_numpy(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))


def test_a_size_computed_from_the_values_shape_inline_keeps_the_chain_going() -> None:
    tracer, _ = trace_dataloader(DataLoader(HalvedInline(), batch_size=4), warmup=0)
    (chain,) = find_prefixes(tracer.dag).chains
    steps = [name for name, _ in chain.common]
    assert steps[:4] == ["numpy.frombuffer", "cv2.imdecode", "cv2.resize", "cv2.cvtColor"], (
        chain.stop
    )


def test_the_cut_saves_the_most_within_the_budget_and_none_when_reading_costs_more() -> None:
    found = _found(False)
    cheap = decide(found, lambda nbytes: (1_000, 2_000), budget_bytes=1 << 30)
    (chain,) = cheap.chains
    assert chain.cached and chain.cut is not None
    best = max(c.saved_ns for c in chain.candidates)
    assert chain.cut.saved_ns == best
    assert cheap.bytes_total == chain.cut.bytes_per_sample * 4
    dear = decide(found, lambda nbytes: (10**9, 10**9), budget_bytes=1 << 30)
    assert not dear.chains[0].cached and "no cut saves time" in dear.chains[0].reason
    nothing = decide(found, lambda nbytes: (1_000, 2_000), budget_bytes=0)
    assert not nothing.chains[0].cached
    off = decide(found, lambda nbytes: (1_000, 2_000), budget_bytes=1 << 30, mode="off")
    assert off.cached_chains == []


@pytest.mark.parametrize("draw", [False, True])
def test_the_samples_other_functions_of_a_chains_library_are_its_guards(draw: bool) -> None:
    section = decide(_found(draw), lambda nbytes: (1_000, 2_000), budget_bytes=1 << 30)
    (chain,) = section.chains
    assert "cv2.imdecode" in chain.functions
    # cv2.add, whose arguments come from a draw, is outside the chain: a value before the cut
    # reaching it (on a branch the trace did not take) is computed there; NumPy and torch take
    # it anyway
    assert chain.guards == (["cv2.add"] if draw else [])


def _pipeline_found(name: str):  # type: ignore[no-untyped-def]
    from codedag.experiments import pipelines

    loader = pipelines.make_loader(name, batch_size=4, num_workers=0, seed=0, n=4)
    tracer, _ = trace_dataloader(loader, warmup=0)
    return find_prefixes(tracer.dag)


def test_an_array_from_untraced_code_after_a_random_draw_is_no_source() -> None:
    # The demo's Dataset is not traced (codedag's own module): its samples are split by dataflow,
    # and its normalized image reaches numpy.transpose with no traced producer after the draws;
    # its warp takes a matrix made from the draws.
    found = _pipeline_found("demo_image")
    (chain,) = found.chains
    assert chain.source_function == "numpy.frombuffer"
    assert [name for name, _ in chain.common][-1] == "cv2.cvtColor"
    assert chain.stop == "cv2.warpAffine also takes a value computed in the sample"


def test_reading_an_images_size_does_not_end_the_chain() -> None:
    # Image.open(path).convert("RGB"); img.size; img.resize(...): the header answers .size
    found = _pipeline_found("pil_recipe")
    (chain,) = found.chains
    steps = [name for name, _ in chain.common]
    assert steps == ["PIL.Image.open", "PIL.Image.Image.convert", "PIL.Image.Image.resize"]
    assert "random draw" in chain.stop


def test_a_cut_whose_store_and_read_cost_more_than_its_prefix_is_not_cached() -> None:
    from codedag.optimize.cache import candidates

    found = _found(False)
    longest = max(c.prefix_ns for c in candidates(found.chains[0]))
    read_ns = longest // 4  # a hit saves three quarters of the longest prefix
    # storing once costs more than a hit saves: over ten epochs it would still gain, but a run
    # of two epochs would be slower
    dear = decide(found, lambda nbytes: (read_ns, longest), budget_bytes=1 << 30)
    (chain,) = dear.chains
    assert not chain.cached and dear.cached_chains == []
    assert "no cut pays for storing" in chain.reason
    cheap = decide(found, lambda nbytes: (read_ns, longest // 2), budget_bytes=1 << 30)
    assert cheap.chains[0].cached
    cut = cheap.chains[0].cut
    assert cut is not None and cut.write_ns + cut.read_ns <= cut.prefix_ns


def _files_found(make, tmp_path):  # type: ignore[no-untyped-def]
    import file_pipelines

    files = file_pipelines.write_files(tmp_path / "files", n=4)
    dataset = make(file_pipelines, files)
    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4), warmup=0)
    return find_prefixes(tracer.dag)


@pytest.mark.parametrize(
    ("make", "source", "steps"),
    [
        (
            lambda m, f: m.Photos(f.images),
            "PIL.Image.open",
            ["PIL.Image.open", "PIL.Image.Image.convert", "PIL.Image.Image.resize"],
        ),
        (
            lambda m, f: m.Clips(f.clips),
            "librosa.core.audio.load",
            ["librosa.core.audio.load", "numpy.pad"],
        ),
        (lambda m, f: m.Volumes(f.volumes), "numpy.load", ["numpy.load", "numpy.clip"]),
    ],
    ids=["pil-with", "librosa-load", "numpy-load"],
)
def test_a_declared_file_source_starts_a_chain(make, source, steps, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # with Image.open(path) as im: __enter__ and __exit__ do not end the chain; librosa.load's
    # waveform is followed to np.pad, and the random crop ends the chain
    found = _files_found(make, tmp_path)
    (chain,) = found.chains
    assert chain.source_function == source and chain.traced[0].source_kind == "file"
    assert [name for name, _ in chain.common][: len(steps)] == steps
    assert found.skipped == []


def test_a_first_call_reading_an_undeclared_file_says_why_it_starts_no_chain(tmp_path) -> None:  # type: ignore[no-untyped-def]
    found = _files_found(lambda m, f: m.ImageSizes(f.images), tmp_path)
    assert found.chains == []
    (skipped,) = found.skipped
    assert skipped.function == "imageio.v3.improps" and skipped.samples == 4
    assert skipped.caller.endswith("ImageSizes.__getitem__")
    assert skipped.reason.startswith("the first call imageio.v3.improps takes uri='")
    assert "which is not a file" in skipped.reason and "file_sources" in skipped.reason
    section = decide(found, lambda nbytes: (1_000, 2_000), budget_bytes=1 << 30)
    assert [s.reason for s in section.skipped] == [skipped.reason]
    assert skipped.reason in section.note


class DecodedStream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """The same decode as Decoded, yielded by an iterable data set."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        for data in ENCODED:
            image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            yield torch.from_numpy(cv2.resize(image, (32, 32)))


class DelegatedStream(DecodedStream):
    """An iterable data set whose ``__iter__`` hands the samples to a method of its own."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return self._decoded()

    def _decoded(self):  # type: ignore[no-untyped-def]
        yield from DecodedStream.__iter__(self)


def _decoded_elsewhere():  # type: ignore[no-untyped-def]
    yield from DecodedStream.__iter__(None)


class ForeignStream(DecodedStream):
    """An iterable data set whose ``__iter__`` hands the samples to a generator not its own."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return _decoded_elsewhere()


@pytest.mark.parametrize("stream", [DecodedStream, DelegatedStream])
def test_an_iterable_data_sets_samples_are_its_generators_resumptions(stream: type) -> None:
    tracer, _ = trace_dataloader(DataLoader(stream(), batch_size=4), warmup=0)
    found = find_prefixes(tracer.dag)
    assert [(c.source_function, c.caller) for c in found.chains] == [
        ("numpy.frombuffer", f"{__name__}.DecodedStream.__iter__")
    ]
    assert len(found.chains[0].traced) == 4  # one per sample of the batch
    assert found.note == ""


def test_an_iterable_data_set_that_hands_its_samples_away_is_named_as_why_no_chain_is_found() -> (
    None
):
    from codedag.integrations.watch import decisions
    from codedag.plan import MigrationPlan
    from codedag.plan.cache import CacheSection

    tracer, _ = trace_dataloader(DataLoader(ForeignStream(), batch_size=4), warmup=0)
    found = find_prefixes(tracer.dag)
    assert found.chains == []
    assert "ForeignStream) is iterable" in found.note and "not one of its methods" in found.note
    # a run's summary says it, as a kept row of the cache section
    section = decide(found, lambda nbytes: (1_000, 2_000), budget_bytes=1 << 30)
    plan = MigrationPlan(context_device_map={}, cache=CacheSection.model_validate(section))
    _moved, kept = decisions(plan)
    assert [(k.section, k.reason) for k in kept] == [("cache", found.note)]


class HeldGenerators(Dataset):
    """decode, then a resize to a size a NumPy generator the data set holds draws (its methods
    are Cython's: they make no profiling event of their own)."""

    def __init__(self, legacy: bool) -> None:
        self.rng = np.random.RandomState(0) if legacy else np.random.default_rng(0)

    def __len__(self) -> int:
        return len(ENCODED)

    def __getitem__(self, index: int) -> torch.Tensor:
        # libraries taking a generator check its type (scipy's random_state=): so may the code
        assert isinstance(self.rng, (np.random.Generator, np.random.RandomState))
        image = cv2.imdecode(np.frombuffer(ENCODED[index], np.uint8), cv2.IMREAD_COLOR)
        size = int(self.rng.randint(24, 32) if hasattr(self.rng, "randint") else 0)
        size = size or int(self.rng.integers(24, 32))
        image = cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)
        return torch.from_numpy(np.ascontiguousarray(image[:16, :16]))


@pytest.mark.parametrize("legacy", [False, True])
def test_a_held_numpy_generators_draw_ends_the_cacheable_prefix(legacy: bool) -> None:
    dataset = HeldGenerators(legacy)
    generator = dataset.rng
    state = repr(generator.get_state() if legacy else generator.bit_generator.state)
    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4), warmup=0)
    # the generator is the data set's again, where it was before the trace
    assert dataset.rng is generator
    assert repr(generator.get_state() if legacy else generator.bit_generator.state) == state
    drawn = {n.name for n in tracer.dag.calls() if ".random." in n.name}
    method = "numpy.random.RandomState.randint" if legacy else "Generator.integers"
    assert any(name.endswith(method) for name in drawn), drawn
    (chain,) = find_prefixes(tracer.dag).chains
    assert [name for name, _ in chain.common] == ["numpy.frombuffer", "cv2.imdecode"]
    assert "cut ends before cv2.resize: it follows a random draw" in chain.stop


class PaletteMasks(Dataset):
    """A palette (``P``) mask, as VOC's segmentation masks are, resized, rotated at random and
    read as class indices; and the same mask converted to ``L`` first."""

    def __init__(self, folder: Path, convert: bool) -> None:
        from PIL import Image

        self.paths = [str(folder / f"{i}.png") for i in range(4)]
        for i, path in enumerate(self.paths):
            mask = Image.fromarray(np.full((30, 40), i, np.uint8), mode="P")
            mask.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
            mask.save(path)
        self.convert = convert

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        from PIL import Image

        mask = Image.open(self.paths[index])
        if self.convert:
            mask = mask.convert("L")
        mask = mask.resize((16, 16), Image.NEAREST)
        # a random rotation: its angle differs between samples, the chain ends here
        mask = mask.rotate(random.uniform(-10.0, 10.0))
        return torch.from_numpy(np.array(mask, dtype=np.int64))


@pytest.mark.parametrize("convert", [False, True])
def test_a_chain_of_palette_images_is_not_cached_and_says_why(
    tmp_path: Path, convert: bool
) -> None:
    # the store keeps no palette image: the chain was planned and then given up at run time,
    # with a warning, after storing nothing for 16 samples
    dataset = PaletteMasks(tmp_path, convert)
    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4), warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    if convert:  # the L image after the conversion is kept
        assert chain.cached and chain.cut is not None and chain.cut.dtype == "L"
    else:
        assert not chain.cached and chain.candidates == []
        assert chain.reason.startswith("its values are PIL images of mode P, which the store")


class BatchItems(Dataset):
    """Items that are whole batches (a loader with ``batch_size=None``): each reads its files
    in a loop, with a random flip drawn between one file's read and the next."""

    def __init__(self, folder: Path) -> None:
        self.paths = [str(folder / f"{i}.png") for i in range(8)]
        for i, path in enumerate(self.paths):
            cv2.imwrite(path, np.full((30, 40), i * 20, np.uint8))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, item: int) -> torch.Tensor:
        images = []
        for path in self.paths[item * 4 : item * 4 + 4]:
            image = cv2.resize(cv2.imread(path, cv2.IMREAD_GRAYSCALE), (16, 16))
            if random.random() < 0.5:
                image = image[:, ::-1]
            images.append(np.ascontiguousarray(image))
        return torch.from_numpy(np.stack(images))


def test_files_read_in_a_loop_by_one_item_are_a_chain_after_the_draws_between_them(
    tmp_path: Path,
) -> None:
    # one traced item: its four reads take the same arguments, so the draws between them did
    # not reach them (before, "one sample" ended the chain at its source)
    loader = DataLoader(BatchItems(tmp_path), batch_size=None)
    tracer, _ = trace_dataloader(loader, warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    assert chain.cached, chain.reason
    assert chain.cut is not None and chain.cut.step == "cv2.resize"


class PickledRecords(Dataset):
    """A dict of arrays pickled into an ``.npy`` file, read back as ``np.load`` returns it: a 0-d
    array of Python objects."""

    def __init__(self, folder: Path) -> None:
        self.paths = [str(folder / f"{i}.npy") for i in range(4)]
        for i, path in enumerate(self.paths):
            np.save(path, {"x": np.full((8, 3), i, np.float32), "y": i}, allow_pickle=True)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        record = np.load(self.paths[index], allow_pickle=True).item()
        return torch.from_numpy(record["x"] * 2)


def test_a_chain_of_arrays_of_python_objects_is_not_cached_and_says_why(tmp_path: Path) -> None:
    # the store keeps no object array: planned, it was given up at run time after 16 samples
    tracer, _ = trace_dataloader(DataLoader(PickledRecords(tmp_path), batch_size=4), warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    assert not chain.cached and chain.candidates == []
    assert chain.reason == "its values are arrays of Python objects, which the store cannot keep"


class Drafted(Dataset):
    """PIL's fast JPEG idiom: ``draft`` changes the opened image in place before its
    conversion."""

    def __init__(self, folder: Path) -> None:
        from PIL import Image

        self.paths = [str(folder / f"{i}.jpg") for i in range(4)]
        for i, path in enumerate(self.paths):
            Image.fromarray(np.full((60, 80, 3), i * 40, np.uint8)).save(path)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        from PIL import Image

        image = Image.open(self.paths[index])
        image.draft("RGB", (40, 30))
        image = image.convert("RGB").resize((16, 16))
        return torch.from_numpy(np.asarray(image).copy())


def test_a_value_several_operations_take_ends_the_chain_and_the_reason_names_them(
    tmp_path: Path,
) -> None:
    tracer, _ = trace_dataloader(DataLoader(Drafted(tmp_path), batch_size=4), warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    assert chain.steps == ["PIL.Image.open"]
    draft = "PIL.JpegImagePlugin.JpegImageFile.draft"  # the JPEG image's own method
    stop = f"its value goes to 2 operations ({draft}, PIL.Image.Image.convert)"
    assert chain.stop == stop and chain.reason.endswith(f"; {stop}")


class DrawnReads(Dataset):
    """A source call after a draw: with the same arguments in every sample (a random flip
    decided first), or with a drawn one (a read mode that differs between samples, as a random
    ``offset=`` of ``librosa.load`` does)."""

    def __init__(self, paths: list[str], drawn_argument: bool) -> None:
        self.paths, self.drawn_argument = paths, drawn_argument

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        flip = random.random() < 0.5
        flags = cv2.IMREAD_COLOR
        if self.drawn_argument:
            flags = (cv2.IMREAD_COLOR, cv2.IMREAD_REDUCED_COLOR_2)[(int(flip) + index) % 2]
        image = cv2.resize(cv2.imread(self.paths[index], flags), (16, 16))
        return torch.from_numpy(np.ascontiguousarray(image[:, ::-1] if flip else image))


@pytest.mark.parametrize("drawn_argument", [False, True])
def test_a_source_call_whose_arguments_a_draw_reaches_starts_no_cached_chain(
    tmp_path: Path, drawn_argument: bool
) -> None:
    from prefix_support import write_images

    paths = write_images(tmp_path, n=4)
    loader = DataLoader(DrawnReads(paths, drawn_argument), batch_size=4)
    tracer, _ = trace_dataloader(loader, warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    if drawn_argument:  # its key would differ in every epoch: storing it would be all cost
        assert not chain.cached and chain.candidates == []
        assert chain.reason == (
            "no value to keep: its source call follows a random draw "
            "(random.random; its arguments differ between samples)"
        )
    else:
        assert chain.cached and chain.steps[:2] == ["cv2.imread", "cv2.resize"]


def test_a_call_drawn_after_in_some_samples_only_is_judged_by_every_samples_arguments() -> None:
    from codedag.optimize.cache import PrefixChain, Step, TracedChain

    def chain(sample: int, drawn: str, size: str) -> TracedChain:
        steps = [
            Step(0, "cv2.imread", 0, 1000, 100, (4, 4, 3), "uint8", "k", "", "", "[]"),
            Step(1, "cv2.resize", 0, 1000, 48, (4, 4, 3), "uint8", "k", "", drawn, size),
        ]
        return TracedChain(sample, "Data.__getitem__", "0", "file", steps, "the sample's output")

    # a draw before the resize in two samples of three (a p=0.5 flip decided first)
    same = PrefixChain("prefix0", "cv2.imread", "Data.__getitem__")
    same.traced = [
        chain(0, "", "[4]"),
        chain(1, "random.random", "[4]"),
        chain(2, "random.random", "[4]"),
    ]
    assert [name for name, _ in same.common] == ["cv2.imread", "cv2.resize"]
    differ = PrefixChain("prefix0", "cv2.imread", "Data.__getitem__")
    differ.traced = [chain(0, "", "[4]"), chain(1, "random.random", "[5]"), chain(2, "", "[4]")]
    assert [name for name, _ in differ.common] == ["cv2.imread"]
    assert differ.stop == (
        "cut ends before cv2.resize: it follows a random draw "
        "(random.random; its arguments differ between samples)"
    )


class Equalized(Dataset):
    """A CLAHE held by the data set, applied after the resize: its ``self`` has no key."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.clahe = cv2.createCLAHE(clipLimit=2.0, tileGridSize=(4, 4))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.resize(cv2.imread(self.paths[index], cv2.IMREAD_GRAYSCALE), (16, 16))
        return torch.from_numpy(self.clahe.apply(image))


def test_a_method_of_an_object_the_data_set_holds_ends_the_chain(tmp_path: Path) -> None:
    from prefix_support import write_images

    tracer, _ = trace_dataloader(DataLoader(Equalized(write_images(tmp_path, n=4)), batch_size=4))
    (chain,) = find_prefixes(tracer.dag).chains
    assert [name for name, _ in chain.common] == ["cv2.imread", "cv2.resize"]
    assert chain.stop == "cv2.CLAHE.apply is a method of an object no key can hold"


class Archives(Dataset):  # type: ignore[type-arg]
    """Samples in ``.npz`` archives: ``np.load`` returns an ``NpzFile``, read by key."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        with np.load(self.paths[index]) as data:
            image = data["image"]
        return torch.from_numpy(cv2.resize(image, (16, 16)))


def test_an_archive_read_by_key_starts_a_chain_at_each_read(tmp_path: Path) -> None:
    """``np.load`` of an ``.npz`` returns an ``NpzFile``, which holds no data of its own; each
    array read from it by key is a source, identified by the archive's file and the key."""
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"{i}.npz")
        np.savez(paths[-1], image=np.full((24, 24, 3), i, np.uint8))
    tracer, _ = trace_dataloader(DataLoader(Archives(paths), batch_size=4), warmup=0)
    load, read = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30).chains
    assert not load.cached and load.source_function == "numpy.load"
    assert load.reason == (
        "numpy.load returns an archive, read further by "
        "numpy.lib._npyio_impl.NpzFile.__getitem__: each read is a chain of its own"
    )
    assert read.steps[:2] == ["numpy.lib._npyio_impl.NpzFile.__getitem__", "cv2.resize"]
    assert read.source_kind == "file" and read.source_slot == "self"
    assert read.cached, read.reason


class Batched(Dataset):  # type: ignore[type-arg]
    """A batched fetch (``__getitems__``, as Hugging Face data sets define it) that loads each
    index with a helper, in a comprehension; each sample draws its flip from a generator seeded
    by its index after the resize."""

    def __init__(self, paths: list[str], through_getitem: bool = False) -> None:
        self.paths = paths
        self.through_getitem = through_getitem

    def __len__(self) -> int:
        return len(self.paths)

    def load(self, index: int) -> torch.Tensor:
        image = cv2.resize(cv2.imread(self.paths[index]), (12, 12))
        if np.random.default_rng(index).random() < 0.5:
            image = image[::-1]
        return torch.from_numpy(np.ascontiguousarray(image))

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.load(index)

    def __getitems__(self, indices: list[int]) -> list[torch.Tensor]:
        if self.through_getitem:
            return [self[i] for i in indices]
        return [self.load(i) for i in indices]


@pytest.mark.parametrize("through_getitem", [False, True])
def test_a_batched_fetchs_samples_are_its_calls_per_index(
    through_getitem: bool, tmp_path: Path
) -> None:
    """Taken whole, the batch was one sample whose later sources followed the earlier ones'
    draws: nothing was cached. Through ``self[i]``, each sample is counted once."""
    from prefix_support import write_images

    dataset = Batched(write_images(tmp_path, n=4), through_getitem)
    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4))
    found = find_prefixes(tracer.dag)
    (chain,) = found.chains
    assert found.samples == 4 and chain.samples == 4 and len(chain.traced) == 4
    assert [name for name, _ in chain.common] == ["cv2.imread", "cv2.resize"]


class ReadTwice(Dataset):
    """A decoded image that two operations read before their values meet again: a scale taken
    from a small copy of it (the cut's function on a branch), a maximum that leaves the trace
    as a truth value, or a percentile pair unpacked out of the trace's sight."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.kind = kind
        self.paths = [str(folder / f"{i}.png") for i in range(4)]
        for i, path in enumerate(self.paths):
            cv2.imwrite(path, np.random.default_rng(i).integers(0, 255, (72, 96, 3), np.uint8))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.imread(self.paths[index]).astype(np.float32)
        if self.kind == "small-copy":
            small = cv2.resize(image, (8, 6))
            image = cv2.resize(image, (40, 30)) - small.mean()
        elif self.kind == "truth":
            if image.max() > 1:
                image = image / 255.0
        elif self.kind == "vignette":  # a constant the sample computes, too big to key
            image = image * (np.ones((72, 96, 3)) * np.linspace(0.5, 1.0, 96)[:, None])
        elif self.kind == "mean":  # a small one: keyed by its bytes
            image = image - np.array([104.0, 117.0, 123.0]) * 1.0
        elif self.kind == "onehot":  # a mask one-hot encoded: the chain's value the index
            image = np.eye(3, dtype=np.float32)[image[..., 0].astype(np.uint8) % 3]
        elif self.kind == "table":  # a table looked up on a branch: gamma of the gray image
            table = ((np.arange(256) / 255.0) ** 0.5 * 255).astype(np.float32)
            gray = table[cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.uint8)]
            image = np.dstack([image, gray])
        elif self.kind == "functions":  # NumPy's functions return numbers, not arrays
            image = (image - np.min(image)) / (np.max(image) - np.min(image))
        else:
            lo, hi = np.percentile(image, (1, 99))
            image = (image - lo) / (hi - lo)
        image = cv2.resize(image, (20, 15))
        return torch.from_numpy(image)


def _read_twice(kind: str, folder: Path):  # type: ignore[no-untyped-def]
    tracer, _ = trace_dataloader(DataLoader(ReadTwice(folder, kind), batch_size=4), warmup=0)
    section = decide(find_prefixes(tracer.dag), lambda nbytes: (1_000, 2_000), 1 << 30)
    (chain,) = section.chains
    return chain


def test_branches_of_a_chains_value_that_meet_again_are_steps_and_never_cuts(
    tmp_path: Path,
) -> None:
    chain = _read_twice("percentile", tmp_path)
    assert chain.steps[:5] == [
        "cv2.imread",
        "numpy.ndarray.astype",
        "numpy.percentile",
        "operator.truediv",
        "cv2.resize",
    ]
    cuts = [(c.step, c.occurrence) for c in chain.candidates]
    assert cuts == [
        ("cv2.imread", 0),
        ("numpy.ndarray.astype", 0),
        ("operator.truediv", 0),
        ("cv2.resize", 0),
        ("torch.from_numpy", 0),
    ]


def test_numbers_numpys_functions_return_are_branches_that_meet_again(tmp_path: Path) -> None:
    chain = _read_twice("functions", tmp_path)
    assert chain.steps[:7] == [
        "cv2.imread",
        "numpy.ndarray.astype",
        "numpy.min",
        "numpy.max",
        "numpy.min",
        "operator.truediv",
        "cv2.resize",
    ]
    assert chain.cut is not None and chain.cut.step in ("cv2.resize", "torch.from_numpy")


def test_a_function_a_branch_calls_is_no_cut_after_it(tmp_path: Path) -> None:
    """The run time counts a cut's calls on one way from the source, which may pass the
    branch's ``cv2.resize``: the last resize is a step, never a cut."""
    chain = _read_twice("small-copy", tmp_path)
    assert chain.steps[:7] == [
        "cv2.imread",
        "numpy.ndarray.astype",
        "cv2.resize",
        "cv2.resize",
        "numpy.ndarray.mean",
        "operator.sub",
        "cv2.resize",
    ]
    assert [c.step for c in chain.candidates] == [
        "cv2.imread",
        "numpy.ndarray.astype",
        "operator.sub",
        "torch.from_numpy",
    ]


def test_a_scalar_that_leaves_the_trace_ends_the_chain_before_its_branch(
    tmp_path: Path,
) -> None:
    """``if image.max() > 1``: the comparison's truth needs the real value, so no cut can be
    after the maximum."""
    chain = _read_twice("truth", tmp_path)
    assert chain.steps == ["cv2.imread", "numpy.ndarray.astype"]
    assert chain.stop.startswith("its value goes to 2 operations (numpy.ndarray.max, ")


@pytest.mark.parametrize("kind", ["vignette", "mean"])
def test_a_constant_the_sample_computes_is_taken_up_to_its_size_limit(
    kind: str, tmp_path: Path
) -> None:
    """The run-time key holds such a constant's bytes, in every call: up to 64 KB."""
    chain = _read_twice(kind, tmp_path)
    if kind == "mean":
        assert chain.steps[:4] == [
            "cv2.imread",
            "numpy.ndarray.astype",
            "operator.sub",
            "cv2.resize",
        ]
    else:
        assert chain.steps == ["cv2.imread", "numpy.ndarray.astype"]
        assert chain.stop == "operator.mul also takes a value computed in the sample"


@pytest.mark.parametrize("kind", ["onehot", "table"])
def test_an_array_indexed_by_the_chains_value_ends_the_chain(kind: str, tmp_path: Path) -> None:
    """``np.eye(C)[mask]``: the identity matrix's ``__getitem__`` needs the mask's real value,
    so a cut after it would compute every sample; the cut is the mask before it (the statement
    here is one step, ``np.eye(3)[image[..., 0].astype(np.uint8) % 3]``)."""
    chain = _read_twice(kind, tmp_path)
    assert chain.steps[0] == "cv2.imread" and "cv2.resize" not in chain.steps
    if kind == "table":  # on a branch: the chain stops before the branches
        assert chain.steps == ["cv2.imread", "numpy.ndarray.astype"]
        assert chain.stop.startswith("its value goes to 2 operations (cv2.cvtColor, ")
        return
    assert chain.stop == (
        "operator.getitem may index an array with the chain's value, which needs the real value"
    )
