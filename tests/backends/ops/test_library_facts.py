"""Each library package's ``facts.py``: plain data that names real things of the installed
library, readable without importing torch or the library."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import codedag.backends.ops.audio.facts as audio_facts
import codedag.backends.ops.cv2.facts as cv2_facts
import codedag.backends.ops.imageio.facts as imageio_facts
import codedag.backends.ops.numpy.facts as numpy_facts
import codedag.backends.ops.pil.facts as pil_facts
import codedag.backends.ops.random.facts as random_facts
import codedag.backends.ops.scipy.facts as scipy_facts
import codedag.backends.ops.skimage.facts as skimage_facts
import codedag.backends.ops.tifffile.facts as tifffile_facts
import codedag.backends.ops.torch.facts as torch_facts
from codedag.backends import libraries
from codedag.backends.facts import LibraryFacts

FACT_MODULES = {
    "audio": audio_facts,
    "cv2": cv2_facts,
    "imageio": imageio_facts,
    "numpy": numpy_facts,
    "pil": pil_facts,
    "random": random_facts,
    "scipy": scipy_facts,
    "skimage": skimage_facts,
    "tifffile": tifffile_facts,
    "torch": torch_facts,
}


def test_every_library_package_is_covered_here() -> None:
    assert set(FACT_MODULES) == set(libraries.ops_packages())


@pytest.mark.parametrize("package", sorted(FACT_MODULES))
def test_facts_are_plain_data_named_after_their_package(package: str) -> None:
    module = FACT_MODULES[package]
    facts = module.FACTS
    assert isinstance(facts, LibraryFacts) and facts.name == package
    assert facts in libraries.library_facts()
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    # nothing else (but typing's names): read before any backend
    assert imported - {"typing"} == {"codedag.backends.facts"}
    assert all(reason for reason in facts.non_migratable.values())


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _resolve(qualified: str) -> object:
    """The object a qualified name names: the longest importable module, then attributes."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(qualified)


@pytest.mark.parametrize("package", sorted(FACT_MODULES))
def test_the_names_in_the_facts_exist_in_the_installed_library(package: str) -> None:
    facts = FACT_MODULES[package].FACTS
    if not all(_installed(m) for m in facts.modules):
        pytest.skip(f"{', '.join(facts.modules)} not installed")
    for name in (*facts.namespaces, *facts.indexed, *facts.wrapped, *facts.python_namespaces):
        importlib.import_module(name)
    for name in facts.non_migratable:
        assert callable(_resolve(name)), name
    present = [n for n in facts.not_wrapped if _exists(n)]  # some exist in older versions only
    assert all(callable(_resolve(n)) for n in present)
    assert len(present) >= len(facts.not_wrapped) - 1
    for module, attribute in facts.data_types:
        assert isinstance(getattr(importlib.import_module(module), attribute), type)
    installed = [d for d in facts.distributions if _distribution(d)]
    assert installed or not facts.distributions, f"none of {facts.distributions} is installed"
    if facts.requirement is not None:
        assert facts.requirement.module in facts.modules


def _exists(qualified: str) -> bool:
    try:
        _resolve(qualified)
    except (ImportError, AttributeError):
        return False
    return True


def _distribution(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_facts_are_read_without_importing_torch_or_any_library() -> None:
    code = (
        "import sys\n"
        "from codedag.backends import libraries\n"
        "names = [f.name for f in libraries.library_facts()]\n"
        "heavy = {'torch', 'cv2', 'PIL', 'librosa', 'scipy'} & set(sys.modules)\n"
        "print(names, sorted(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == f"{sorted(FACT_MODULES)} []"
