"""The registry: strategies, NonMigratable refusals, canonical names, defensive module loading."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from migrate_support import add, clip, flip, plan_for

from codedag.errors import MigrationError
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.registry import (
    DEVICE,
    NON_MIGRATABLE,
    TORCH_MOVE_ONLY,
    OpSpec,
    Registry,
    Strategy,
    _load_ops_module,
    default_registry,
    is_migratable,
    list_supported_functions,
    spec_from_backend,
)
from codedag.patching import resolve
from codedag.trace.names import canonical_name


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
    assert image.strategy is Strategy.STANDARD_OP and image.output_order == "C"
    assert image.batch is not None and image.batch.positions == (0,)
    binary = spec_from_backend("cv2.add", add, "cv2")
    assert binary.batch is not None and binary.batch.positions == (0, 1)
    array = spec_from_backend("numpy.clip", clip, "numpy")
    assert array.strategy is Strategy.MOVE_ONLY and array.batch is None

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
