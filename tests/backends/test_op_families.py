"""Each ops package as its modules declare it: every family's ``OPS`` registered under that family
with a conformance corpus (or kept off per-call placement with a reason: methods of C types that
only batched recording uses), and each library's adapter the one its specs use."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from conformance_corpus import covered

from codedag.backends import ops
from codedag.backends.libraries import ops_packages
from codedag.backends.registry import default_registry

LIBRARIES = ops_packages()
FAMILIES = [
    f"codedag.backends.ops.{library}.{info.name}"
    for library in LIBRARIES
    for info in pkgutil.iter_modules(importlib.import_module(f"{ops.__name__}.{library}").__path__)
    if not info.name.startswith("_") and info.name != "facts"
]


def test_the_packages_and_families_are_found() -> None:
    assert {"audio", "cv2", "numpy", "pil", "torch"} <= set(LIBRARIES)
    assert {
        "codedag.backends.ops.cv2.filter",
        "codedag.backends.ops.cv2.warp",
        "codedag.backends.ops.numpy.reduce",
        "codedag.backends.ops.pil.image",
        "codedag.backends.ops.pil.imageops",
        "codedag.backends.ops.pil.rotate",
        "codedag.backends.ops.audio.resample",
        "codedag.backends.ops.cv2.canny",
        "codedag.backends.ops.cv2.hist",
        "codedag.backends.ops.cv2.arith",
        "codedag.backends.ops.cv2.geometry",
        "codedag.backends.ops.cv2.resize",
    } <= set(FAMILIES)


@pytest.mark.parametrize("module_name", FAMILIES)
def test_a_familys_ops_are_registered_under_it_with_a_corpus(module_name: str) -> None:
    module = importlib.import_module(module_name)
    declared = getattr(module, "OPS", ())
    assert declared, f"{module_name} declares no OPS"
    registry = default_registry()
    family = module_name.rsplit(".", 1)[1]
    by_family = {s.name for s in registry.specs() if s.family == family}
    with_corpus = covered()
    for spec in declared:
        registered = registry.get(spec.name)
        if registered is None:  # declared for recording only: placement refuses it, saying why
            assert registry.non_migratable.get(spec.name), f"{spec.name} is neither op nor refused"
            continue
        assert registered.family == family
        assert registered.name in by_family
        assert registered.name in with_corpus, f"{registered.name} has no conformance corpus"


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_librarys_adapter_and_facts_match_its_specs(library: str) -> None:
    package = importlib.import_module(f"codedag.backends.ops.{library}")
    facts = importlib.import_module(f"codedag.backends.ops.{library}.facts").FACTS
    if not hasattr(package, "LIBRARY"):  # facts only (Python's random): no op, no family
        assert not any(f.startswith(f"{package.__name__}.") for f in FAMILIES)
        assert facts.name == library and library not in default_registry().libraries
        return
    declared = package.LIBRARY
    assert declared.facts is facts and facts.name == library
    registry = default_registry()
    if not declared.specs:  # known without a backend (SciPy: the prefix cache patches it)
        assert library in registry.libraries
        assert not any(registry.get(n).library == library for n in registry.names())
        return
    placed = 0
    for spec in declared.specs:
        registered = registry.get(spec.name)
        if registered is None:
            assert registry.non_migratable.get(spec.name)
            continue
        placed += 1
        assert registered.library == library
        assert registered.adapter is spec.adapter
        if spec.adapter is not None:
            assert spec.adapter is declared.adapter
    assert placed, f"{library} places no op"
    for name, reason in facts.non_migratable.items():  # what stays on the CPU says why
        assert isinstance(reason, str) and reason, name
