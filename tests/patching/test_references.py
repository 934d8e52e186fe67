"""Finding and putting back references to a function by identity: module attributes, small
registries two levels deep, and (in modules imported while patched) class attributes and the
attributes of plain objects."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from codedag.patching.references import (
    Site,
    package_of,
    reference_sites,
    sweep_modules,
    unwrap_descriptor,
)


def _function() -> types.FunctionType:
    """A new function no module holds (this test module's own functions would be found)."""

    def fn(x: int) -> int:
        return x

    return fn  # type: ignore[return-value]


class Owner:
    """Stands in for the library module that defines ``original``."""


@pytest.fixture
def user_module() -> Iterator[types.ModuleType]:
    module = types.ModuleType("refs_user_mod")
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_reference_sites_finds_attributes_and_registries(user_module: types.ModuleType) -> None:
    original = _function()
    user_module.resize = original
    user_module.AUGMENT = {"resize": original, "other": len}
    user_module.PIPELINE = [[original], {"nested": original}]
    user_module.BIG = [*range(5000), original]  # data, not a registry: not searched
    found = reference_sites({id(original): (original, set(), Owner, "original")})[id(original)]
    places = {(id(site.container), site.key, site.item) for site in found}
    assert (id(user_module), "resize", False) not in places  # attributes come as dict items
    assert (id(vars(user_module)), "resize", True) in places
    assert (id(user_module.AUGMENT), "resize", True) in places
    assert (id(user_module.PIPELINE[0]), 0, True) in places
    assert (id(user_module.PIPELINE[1]), "nested", True) in places
    assert len(found) == 4


def test_the_primary_site_and_skipped_packages_are_left_out(user_module: types.ModuleType) -> None:
    original = _function()
    user_module.original = original
    found = reference_sites({id(original): (original, set(), user_module, "original")})
    assert found[id(original)] == []  # the owner's own attribute is patched by name
    user_module.alias = original
    skipping = reference_sites({id(original): (original, {"refs_user_mod"}, Owner, "x")})
    assert skipping[id(original)] == []


def test_a_package_one_target_skips_is_still_searched_for_the_others(
    user_module: types.ModuleType,
) -> None:
    mine, other = _function(), _function()
    user_module.mine, user_module.other = mine, other
    found = reference_sites(
        {
            id(mine): (mine, {"refs_user_mod"}, Owner, "x"),
            id(other): (other, {"elsewhere"}, Owner, "x"),
        }
    )
    assert found[id(mine)] == []
    assert [(site.container, site.key) for site in found[id(other)]] == [
        (vars(user_module), "other")
    ]


def test_standard_modules_are_searched_only_for_standard_targets() -> None:
    module = types.ModuleType("json.refs_std_mod")  # a standard-library package name
    sys.modules[module.__name__] = module
    try:
        library, standard = _function(), _function()
        module.library, module.standard = library, standard
        assert reference_sites({id(library): (library, {"cv2"}, Owner, "x")})[id(library)] == []
        for origin in ("math", "builtins"):
            found = reference_sites({id(standard): (standard, {origin}, Owner, "x")})[id(standard)]
            assert [(site.container, site.key) for site in found] == [(vars(module), "standard")]
    finally:
        del sys.modules[module.__name__]


def test_sweep_puts_originals_back_in_registries_of_any_module(
    user_module: types.ModuleType,
) -> None:
    original, replacement = _function(), _function()
    user_module.REGISTRY = {"f": replacement}
    user_module.bound = replacement
    count = sweep_modules({id(replacement): (replacement, original)}, set())
    assert count == 2
    assert user_module.REGISTRY["f"] is original and user_module.bound is original


def test_sweep_searches_older_standard_modules_only_for_standard_originals() -> None:
    module = types.ModuleType("json.refs_std_sweep")
    sys.modules[module.__name__] = module
    try:
        original, replacement = _function(), _function()
        pair = {id(replacement): (replacement, original)}
        module.REGISTRY = {"f": replacement}
        assert sweep_modules(pair, set(), {"cv2"}) == 0
        assert sweep_modules(pair, {module.__name__}, {"cv2"}) == 1  # imported while patched
        assert module.REGISTRY["f"] is original
        for origins in ({"cv2", "math"}, {"builtins"}, None):
            module.REGISTRY["f"] = replacement
            assert sweep_modules(pair, set(), origins) == 1
            assert module.REGISTRY["f"] is original
    finally:
        del sys.modules[module.__name__]


def test_sweep_reaches_classes_and_objects_of_modules_imported_while_patched(
    user_module: types.ModuleType,
) -> None:
    original, replacement = _function(), _function()
    exec(
        "class Aug:\n    fn = None\n    sfn = None\nclass Holder:\n    pass\n",
        vars(user_module),
    )
    user_module.Aug.fn = replacement
    user_module.Aug.sfn = staticmethod(replacement)
    holder = user_module.Holder()
    holder.op = replacement
    user_module.holder = holder
    old = sweep_modules({id(replacement): (replacement, original)}, set())
    assert old == 0 and user_module.Aug.fn is replacement  # an older module: registries only
    new = sweep_modules({id(replacement): (replacement, original)}, {"refs_user_mod"})
    assert new == 3
    assert user_module.Aug.fn is original and holder.op is original
    assert isinstance(vars(user_module.Aug)["sfn"], staticmethod)
    assert user_module.Aug.sfn is original


def test_small_helpers() -> None:
    original = _function()
    box = {"k": 1}
    Site(box, "k", item=True).set(2)
    Site(Owner, "attr", item=False).set(3)
    assert box == {"k": 2} and Owner.attr == 3  # type: ignore[attr-defined]
    assert unwrap_descriptor(staticmethod(original)) is original
    assert unwrap_descriptor(original) is original
    assert package_of(pytest.raises) == "_pytest" and package_of(object()) == ""
