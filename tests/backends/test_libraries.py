"""Each library package declares its own facts; the central tables are views of them.

A new library is its package (``facts.py``, an adapter, modules of ops) and its tests: the test
below adds a package in a temporary folder and finds it in every table the tracer, the registry,
calibration, the doctor and the docs read.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import codedag
from codedag import doctor
from codedag.backends import libraries, ops
from codedag.backends.doc_tables import render
from codedag.backends.facts import FILE_IO
from codedag.backends.names import INDEXED_MODULES, PUBLIC_PYTHON_MODULES, canonical_name
from codedag.backends.registry import (
    NON_MIGRATABLE,
    PYTHON_NON_MIGRATABLE,
    RANDOM_PREFIXES,
    build_default_registry,
    spec_from_backend,
)
from codedag.calibrate.environment import library_versions
from codedag.trace import interpose
from codedag.trace.filter import KNOWN_LIBRARIES, OTHER_LIBRARIES
from codedag.trace.value_nodes import DATA_BASES

FAKE_FACTS = """
from codedag.backends.facts import FILE_IO, LibraryFacts, Requirement

FACTS = LibraryFacts(
    name="fakelib",
    modules=("fakelib_mod",),
    namespaces=("fakelib_mod",),
    indexed=("fakelib_mod",),
    wrapped=("fakelib_mod",),
    not_wrapped=("fakelib_mod.noisy",),
    library_packages=("fakelib_dep",),
    data_types=(("fakelib_mod", "Frame"),),
    distributions=("pytest",),
    non_migratable={"fakelib_mod.load": FILE_IO},
    random_prefixes=("fakelib_mod.random_",),
    requirement=Requirement("fakelib-dist", "fakelib_mod", "fake pipelines", "fake"),
)
"""
FAKE_INIT = """
from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.fakelib.arith import FAKE
from codedag.backends.ops.fakelib.facts import FACTS

LIBRARY = Library(FACTS, FAKE, collect_specs(__name__, __path__))
"""
FAKE_ARITH = '''
from codedag.backends.adapters import ArrayAdapter
from codedag.backends.contract import Tolerance, declare

FAKE = ArrayAdapter("fakelib")


def double(a):
    """fakelib_mod.double: twice its input."""
    return a * 2


OPS = [
    declare(
        "fakelib_mod.double",
        double,
        FAKE,
        tolerance=Tolerance(rtol=1e-6, note="float rounding"),
        reproduces="any array",
    )
]
'''
FAKE_LIBRARY = """
class _Kernel:
    def __call__(self, x):
        return x


class Frame:
    pass


def double(a):
    return a * 2


def load(path):
    return path


noisy = _Kernel()
kernel = _Kernel()
"""


@pytest.fixture
def fake_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A library package ``fakelib`` for a library module ``fakelib_mod``, found by discovery."""
    package = tmp_path / "ops" / "fakelib"
    package.mkdir(parents=True)
    (package / "facts.py").write_text(textwrap.dedent(FAKE_FACTS))
    (package / "__init__.py").write_text(textwrap.dedent(FAKE_INIT))
    (package / "arith.py").write_text(textwrap.dedent(FAKE_ARITH))
    (tmp_path / "fakelib_mod.py").write_text(textwrap.dedent(FAKE_LIBRARY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ops, "__path__", [*ops.__path__, str(tmp_path / "ops")])
    libraries.refresh()
    try:
        yield "fakelib"
    finally:
        monkeypatch.undo()
        for name in [
            m for m in sys.modules if m.startswith(("fakelib_mod", f"{ops.__name__}.fake"))
        ]:
            del sys.modules[name]
        libraries.refresh()


def test_a_new_library_package_is_in_every_derived_table(fake_library: str) -> None:
    import fakelib_mod  # the library, imported by the user's pipeline

    assert fake_library in libraries.ops_packages()
    # the registry: its ops, aliases, tolerances, functions kept on the CPU, random draws
    assert NON_MIGRATABLE.get("fakelib_mod.load") == FILE_IO
    assert "fakelib_mod.random_" in RANDOM_PREFIXES
    registry = build_default_registry()
    assert not registry.load_errors
    spec = registry.get("fakelib_mod.double")
    assert spec is not None and spec.library == "fakelib" and spec.family == "arith"
    assert not registry.is_migratable("fakelib_mod.load")
    assert registry.tolerances()["fakelib_mod.double"].note == "float rounding"
    assert spec_from_backend("fakelib_mod.triple", lambda a: a * 3).library == "fakelib"
    # the name index and the tracer
    assert "fakelib_mod" in INDEXED_MODULES and "fakelib_mod" not in PUBLIC_PYTHON_MODULES
    assert canonical_name(fakelib_mod.kernel) == "fakelib_mod.kernel"
    assert {"fakelib_mod", "fakelib_dep"} <= set(KNOWN_LIBRARIES)
    assert "fakelib_mod" in interpose.WRAPPED_MODULES
    targets = interpose.library_targets()
    assert "fakelib_mod.kernel" in targets and "fakelib_mod.noisy" not in targets
    assert ("fakelib_mod", "Frame") in DATA_BASES
    # calibration's key, the doctor, the docs
    assert "pytest" in library_versions("fakelib_mod.double")
    assert ("fake", "fakelib_mod", "fake pipelines", "pip install 'codedag[fake]'") in list(
        doctor.OPTIONAL_EXTRAS
    )
    table = render("ops fakelib", registry)
    assert "| `double` | any array | any | float rounding |" in table


def test_the_central_tables_hold_what_the_packages_declare() -> None:
    facts = {f.name: f for f in libraries.library_facts()}
    assert set(facts) == set(libraries.ops_packages())
    for name, declared in facts.items():
        for function, reason in declared.non_migratable.items():
            assert NON_MIGRATABLE[function] == reason, (name, function)
    assert set(PYTHON_NON_MIGRATABLE) <= set(NON_MIGRATABLE)
    assert list(INDEXED_MODULES) == [m for f in facts.values() for m in f.indexed]
    assert set(KNOWN_LIBRARIES) == libraries.library_packages() | OTHER_LIBRARIES
    assert KNOWN_LIBRARIES & {"torch", "no_such"} == {"torch"}  # views answer set operations


# Literals naming a library (its modules, or its distributions) in the modules that hold tables
# derived from the library packages: library mechanics, not facts of a library. This list only
# shrinks: a library's facts belong in its package's facts.py.
ALLOWED = {
    "backends/names.py": [
        "numpy",
        "numpy",
        "numpy._core.multiarray",
    ],  # NumPy's dispatchers, ufuncs
    "backends/tolerances.py": ["PIL.Image"],  # comparing PIL images
    "trace/filter.py": ["torch.utils.data._utils.collate", "torch.utils.data.collate"],
    "trace/value_nodes.py": ["numpy.ndarray", "torch", "torch."],  # describing arrays and tensors
    "calibrate/environment.py": ["torch", "torch"],  # torch's version keys every measurement
    "doctor.py": ["numpy", "numpy", *["torch"] * 10],  # codedag's own dependencies, torch's check
}
DERIVED_TABLE_MODULES = (
    "backends/registry.py",
    "backends/names.py",
    "backends/tolerances.py",
    "backends/libraries.py",
    "backends/doc_tables.py",
    "trace/interpose.py",
    "trace/filter.py",
    "trace/value_nodes.py",
    "calibrate/environment.py",
    "doctor.py",
)


def _literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and ast.get_docstring(node, clean=False) is not None
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_the_modules_holding_derived_tables_name_no_library() -> None:
    facts = libraries.library_facts()
    tops = {m for f in facts for m in (*f.modules, *f.library_packages)}
    distributions = {d for f in facts for d in f.distributions}
    root = Path(codedag.__file__).parent
    found = {}
    for module in DERIVED_TABLE_MODULES:
        named = [
            s for s in _literals(root / module) if s.split(".", 1)[0] in tops or s in distributions
        ]
        if named:
            found[module] = Counter(named)
    assert found == {m: Counter(names) for m, names in ALLOWED.items()}
