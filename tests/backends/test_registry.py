"""The registry: strategies, NonMigratable refusals, canonical names, defensive module loading."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest
import torch
from migrate_support import add, clip, flip, plan_for

from codedag.backends.names import canonical_name
from codedag.backends.ops.torch import TORCH_MOVE_ONLY
from codedag.backends.registry import (
    DEVICE,
    NON_MIGRATABLE,
    OpSpec,
    Registry,
    Strategy,
    _load_ops_module,
    default_registry,
    is_migratable,
    list_supported_functions,
    spec_from_backend,
)
from codedag.errors import MigrationError
from codedag.migrate.api import PipelineMigrator
from codedag.patching import resolve


def test_list_supported_functions_by_strategy() -> None:
    supported = list_supported_functions()
    assert set(supported) == {"MoveOnly", "StandardOp", "FactoryOp"}
    assert "torch.nn.functional.interpolate" in supported["MoveOnly"]
    every = [n for names in supported.values() for n in names]
    assert len(every) == len(set(every))
    assert not set(every) & set(NON_MIGRATABLE)


def test_io_and_decoders_are_never_migratable() -> None:
    for name in ("cv2.imread", "cv2.imdecode", "PIL.Image.open", "numpy.load", "librosa.load"):
        assert not is_migratable(name)
        assert name in NON_MIGRATABLE
    assert not is_migratable("os.system") and not is_migratable("no.such.function")
    with pytest.raises(MigrationError, match="file or network I/O"):
        Registry().register(OpSpec("cv2.imread", Strategy.MOVE_ONLY))


def test_specs_from_contract_backends() -> None:
    image = spec_from_backend("cv2.flip", flip, "cv2")
    assert image.strategy is Strategy.STANDARD_OP and image.library == "cv2"
    assert image.adapter is not None
    assert image.adapter.data_positions(image) == ((0, "src"),)
    binary = spec_from_backend("cv2.add", add, "cv2")
    assert binary.adapter is not None
    assert binary.adapter.data_positions(binary) == ((0, "src1"), (1, "src2"))
    array = spec_from_backend("numpy.clip", clip, "numpy")
    assert array.strategy is Strategy.MOVE_ONLY and array.library == "numpy"

    def draw(size: object = None, *, device: object = None) -> torch.Tensor:
        return torch.zeros(1)

    assert spec_from_backend("numpy.random.random", draw, "numpy").inject_kwargs == {
        "device": DEVICE
    }


def test_a_broken_backend_module_does_not_break_the_registry() -> None:
    registry = Registry()
    _load_ops_module(registry, "no_such_backend_module")
    assert "no_such_backend_module" in registry.load_errors
    registry.register(spec_from_backend("numpy.clip", clip, "numpy"))
    assert registry.is_migratable("numpy.clip")


def test_every_registry_name_is_reachable_under_its_canonical_name() -> None:
    """The traced name of each registered function (canonical_name of the object) hits the
    registry, so plan keys written from a trace always find their spec."""
    registry = default_registry()
    missing = []
    for name in list(registry.names()) + list(TORCH_MOVE_ONLY):
        try:
            _owner, _attr, raw = resolve(name)
        except MigrationError:
            continue  # a library or function absent in this version
        obj = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
        if not registry.is_migratable(canonical_name(obj)):
            missing.append((name, canonical_name(obj)))
    assert not missing
    for name in TORCH_MOVE_ONLY:  # built-in names are canonical names themselves
        assert canonical_name(resolve(name)[2]) == name


def test_c_type_methods_are_not_migratable() -> None:
    registry = default_registry()
    if "numpy.ndarray.sum" in registry.non_migratable:
        assert not registry.is_migratable("numpy.ndarray.sum")
        assert "C type" in registry.non_migratable["numpy.ndarray.sum"]


def test_aliases_of_one_function_are_all_patched() -> None:
    registry = Registry()
    spec = spec_from_backend("numpy.absolute", lambda x, out=None: x.abs(), "numpy")
    registry.register(spec)
    canonical = canonical_name(np.absolute)  # "numpy.abs" in NumPy 2: the name traces carry
    assert registry.is_migratable(canonical)
    original = np.absolute
    plan = plan_for({f"app.f#0/{canonical}#0": "cpu"})
    x = np.array([-1.5, 2.0], dtype=np.float32)
    with PipelineMigrator.from_plan(plan, registry=registry) as migrator:
        np.testing.assert_array_equal(np.abs(x), [1.5, 2.0])
        np.testing.assert_array_equal(np.absolute(x), [1.5, 2.0])
        assert np.absolute.nin == 1 and np.absolute.types == original.types  # ufunc attributes
    assert np.absolute is original and np.abs is original
    assert migrator.get_stats()["functions"][canonical]["migrated"] == 2


def _resolve(name: str) -> object:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


@pytest.mark.parametrize("package", ["cv2", "numpy", "pil", "audio"])
def test_declared_names_resolve_and_traced_names_find_the_same_backend(package: str) -> None:
    if package == "audio":
        pytest.importorskip("librosa")
    library = importlib.import_module(f"codedag.backends.ops.{package}").LIBRARY
    registry = default_registry()
    for spec in library.specs:
        if spec.name in registry.non_migratable:
            continue
        target = _resolve(spec.name)
        assert callable(target), spec.name
        assert spec.backend is not None and spec.backend.__doc__, spec.name
        found = registry.get(canonical_name(target))
        assert found is not None, (spec.name, canonical_name(target))
        assert found.backend is spec.backend and found.name == canonical_name(target)


def test_aliases_resolve_once_to_one_spec() -> None:
    registry = default_registry()
    for alias, name in [
        ("numpy.abs", "numpy.absolute"),
        ("numpy.pow", "numpy.power"),
        ("numpy.concat", "numpy.concatenate"),
        ("numpy.true_divide", "numpy.divide"),
        ("numpy.acos", "numpy.arccos"),
    ]:
        assert registry.get(alias) is registry.get(name) is not None, alias
        assert registry.canonical(alias) == canonical_name(getattr(np, name.split(".")[1]))
        assert {alias, name} <= registry.aliases(name)
    names = registry.names()
    assert "numpy.abs" not in names and "numpy.absolute" in names  # canonical names only
    assert len(names) == len(set(names))


def test_aliases_follow_an_unregistered_and_a_registered_spec() -> None:
    from codedag.backends.registry import build_default_registry

    registry = build_default_registry()  # one of its own: the process's stays as it is
    spec = registry.get("numpy.absolute")
    assert spec is not None and "numpy.abs" in registry.aliases("numpy.absolute")  # read once
    registry.unregister("numpy.abs")
    assert "numpy.abs" not in registry.aliases(spec.name)
    registry.register(spec)
    assert "numpy.abs" in registry.aliases(spec.name)


def test_a_library_release_past_the_verified_ones_keeps_its_calls_with_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib.metadata

    from codedag.backends.ops.cv2.facts import FACTS

    versions = {"opencv-python-headless": "5.1.0.95"}

    def version(distribution: str) -> str:
        if distribution not in versions:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return versions[distribution]

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert FACTS.verified_below == "5.1" and FACTS.unverified_version() == "5.1.0.95"
    newer = Registry()
    with caplog.at_level("WARNING", logger="codedag.backends.registry"):
        _load_ops_module(newer, "cv2")
    assert "cv2" in newer.libraries  # its facts still name its functions
    assert not newer.is_migratable("cv2.resize") and not newer.is_migratable("cv2.add")
    assert "5.1.0.95 is newer than the releases" in newer.load_errors["cv2"]
    assert len(caplog.records) == 1
    versions["opencv-python-headless"] = "5.0.0.93"
    assert FACTS.unverified_version() is None
    verified = Registry()
    _load_ops_module(verified, "cv2")
    assert verified.is_migratable("cv2.resize") and "cv2" not in verified.load_errors
    versions.clear()  # not installed under any of its names: nothing to compare
    assert FACTS.unverified_version() is None


def _lazy_package(
    monkeypatch: pytest.MonkeyPatch, loads: list[str], submodules: tuple[str, ...] = ("sub",)
) -> None:
    """``lazypkg``: a package whose submodules (each defining ``<name>_function``) are imported by
    its module ``__getattr__`` (as lazy_loader packages such as librosa do), recording each load."""
    import sys
    import types

    package = types.ModuleType("lazypkg")

    def load(name: str) -> object:
        if name not in submodules:
            raise AttributeError(name)
        loads.append(name)

        def function(x: object) -> object:
            return x

        function.__module__ = f"lazypkg.{name}"
        function.__qualname__ = function.__name__ = f"{name}_function"
        module = types.ModuleType(f"lazypkg.{name}")
        setattr(module, function.__name__, function)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        setattr(package, name, module)
        return module

    package.__getattr__ = load  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazypkg", package)


def test_filing_what_is_loaded_never_loads_a_lazy_submodule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[str] = []
    _lazy_package(monkeypatch, loads)
    registry = Registry()
    registry.register(OpSpec("lazypkg.sub.sub_function", Strategy.MOVE_ONLY))
    registry._resolve_pending("lazypkg", imports=False)  # what building the default one does
    assert loads == []  # an imported lazy package's submodules stay unloaded
    # a lookup asks for the function: then it is loaded, and found
    assert registry.get("lazypkg.sub.sub_function") is not None
    assert loads == ["sub"]


def test_a_function_loaded_already_is_filed_without_importing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[str] = []
    _lazy_package(monkeypatch, loads)
    import sys

    sys.modules["lazypkg"].sub  # the script's own access loads it  # noqa: B018
    registry = Registry()
    registry.register(OpSpec("lazypkg.sub.sub_function", Strategy.MOVE_ONLY))
    registry._resolve_pending("lazypkg", imports=False)
    assert "lazypkg" not in registry._pending  # filed
    assert registry.canonical("lazypkg.sub.sub_function") == "lazypkg.sub.sub_function"
    assert loads == ["sub"]


def test_the_default_registry_leaves_an_imported_lazy_package_unloaded() -> None:
    """librosa imported but never called (as torchmetrics imports it under Lightning): building
    the registry loads none of its submodules (seconds of numba compilation)."""
    import subprocess
    import sys

    code = (
        "import sys, librosa\n"
        "from codedag.backends.registry import build_default_registry\n"
        "build_default_registry()\n"
        "print(sorted(m for m in sys.modules if m.startswith('librosa.core')))\n"
    )
    pytest.importorskip("librosa")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_a_lookup_of_a_loaded_function_loads_no_other_submodule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An audio pipeline calls librosa.load only: looking its name up files what is loaded and
    leaves the other declared functions' lazy submodules unloaded."""
    import sys

    loads: list[str] = []
    _lazy_package(monkeypatch, loads, ("sub", "other"))
    package = sys.modules["lazypkg"]
    registry = Registry()
    registry.register(OpSpec("lazypkg.sub.sub_function", Strategy.MOVE_ONLY))
    registry.register(OpSpec("lazypkg.other.other_function", Strategy.MOVE_ONLY))
    registry._resolve_pending("lazypkg", imports=False)
    package.sub  # the pipeline's own call loads its submodule  # noqa: B018
    assert registry.get("lazypkg.sub.sub_function") is not None
    assert loads == ["sub"]  # "other" stays unloaded
    assert registry.get("lazypkg.other.other_function") is not None  # asked for: loaded
    assert loads == ["sub", "other"]


def test_the_default_registry_loads_a_library_package_at_its_first_name() -> None:
    # the ops packages are ~50 modules: a plan placing nothing (or cv2 only) loads no other;
    # what a loaded package would refuse is refused before it loads
    script = """
import sys
from codedag.backends.admission import admit
from codedag.backends.registry import build_default_registry
loaded = lambda: sorted(
    m.split(".")[3] for m in sys.modules
    if m.startswith("codedag.backends.ops.") and m.count(".") == 3
)
registry = build_default_registry()
assert loaded() == [], loaded()
assert registry.get("cv2.resize") is not None
assert loaded() == ["cv2"], loaded()
found = admit([("calls.0", "numpy.ndarray.astype")], registry)
assert "C type" in found.refused["numpy.ndarray.astype"], found
assert loaded() == ["cv2", "numpy"], loaded()
assert set(registry.libraries) == {
    "audio", "cv2", "imageio", "numpy", "pil", "scipy", "skimage", "tifffile", "torch"
}
assert "cv2.resize" in registry.names()
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
