"""File sources: declared once in a library's facts, found by public and canonical names."""

from __future__ import annotations

import pytest

from codedag.backends import libraries
from codedag.backends.facts import FileSource
from codedag.backends.sources import file_source


@pytest.mark.parametrize(
    ("name", "argument"),
    [
        ("cv2.imread", "filename"),
        ("PIL.Image.open", "fp"),
        ("numpy.load", "file"),
        ("numpy.fromfile", "file"),
        ("librosa.load", "path"),
        ("librosa.core.audio.load", "path"),  # the canonical name a trace carries
        ("soundfile.read", "file"),
    ],
)
def test_each_declared_source_is_found_by_its_public_and_canonical_name(
    name: str, argument: str
) -> None:
    found = file_source(name)
    assert found is not None and found.argument == argument


def test_a_tuple_result_names_the_item_followed_and_the_items_echoing_arguments() -> None:
    assert file_source("librosa.load") == FileSource("path", item=0, echoes={1: "sr"})
    assert file_source("cv2.resize") is None and file_source("imageio.v3.improps") is None
    assert file_source("numpy.loadtxt") == FileSource("fname")


def test_every_source_is_declared_in_one_library_facts_module() -> None:
    declared = [n for facts in libraries.library_facts() for n in facts.file_sources]
    assert len(declared) == len(set(declared)) and set(declared) == set(libraries.file_sources())


def test_libraries_declare_the_protocols_their_functions_take_values_through() -> None:
    assert libraries.protocol_modules() == ("numpy", "random", "scipy", "skimage", "torch")
    assert libraries.modules_taking("__array__") == ("numpy", "scipy", "skimage")
    assert libraries.modules_taking("__getitem__") == ("random",)
    pools = {facts.name: pool for facts, pool in libraries.thread_pools()}
    assert set(pools) == {"cv2"} and pools["cv2"].joins_on_shrink


def _load(path: str, rate: int = 22_050, *, sr: int | None = 16_000) -> None:
    """A reader of the shape of ``librosa.load``: a positional and a keyword-only default."""


def test_an_arguments_value_is_read_from_the_call_or_its_default() -> None:
    from codedag.backends.sources import argument_value

    assert argument_value(_load, "sr", ("a.wav",), {"sr": 8_000}) == 8_000
    assert argument_value(_load, "sr", ("a.wav",), {}) == 16_000  # keyword-only, by default
    assert argument_value(_load, "rate", ("a.wav", 44_100), {}) == 44_100  # by position
    assert argument_value(_load, "rate", ("a.wav",), {}) == 22_050
    assert argument_value(_load, "nothing", ("a.wav",), {}) is None
    assert argument_value(len, "obj", ([],), {}) == []  # a builtin, positional only
    assert argument_value(len, "obj", (), {}) is None
