"""Modules whose import draws from a global random generator are found while codedag imports,
each once, named with the module the import went through."""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from codedag.util.import_draws import ImportDraw, draws_line, noting_import_draws

MODULES = {
    "draws_at_import_py": "import random\n_ID = random.getrandbits(24)\n",
    "draws_at_import_np": "import numpy as np\nSHIFT = np.random.rand()\n",
    "imports_a_drawer": "import draws_at_import_py\nVALUE = 1\n",
    "draws_nothing_at_import": "import math\nVALUE = math.pi\n",
}


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, body in MODULES.items():
        (tmp_path / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in MODULES:
        sys.modules.pop(name, None)


def test_a_drawing_import_is_named_with_the_module_it_went_through(modules: None) -> None:
    np.random.seed(0)  # NumPy's generator is there (NumPy imports it lazily), as once seeded
    found: list[ImportDraw] = []
    finders = list(sys.meta_path)
    with noting_import_draws(found):
        for name in ("draws_nothing_at_import", "imports_a_drawer", "draws_at_import_np"):
            importlib.import_module(name)
    assert sys.meta_path == finders
    assert found == [
        ImportDraw("draws_at_import_py", "imports_a_drawer"),
        ImportDraw("draws_at_import_np", "draws_at_import_np"),
    ]
    line = draws_line(found, "to apply the plan")
    assert line.startswith(
        "codedag imported draws_at_import_py (imported by imports_a_drawer), draws_at_import_np "
        "to apply the plan"
    )
    assert "import imports_a_drawer at the top of the script, before seeding" in line


def test_imports_outside_the_block_and_modules_already_imported_are_not_noted(
    modules: None,
) -> None:
    import draws_at_import_py  # noqa: F401

    found: list[ImportDraw] = []
    with noting_import_draws(found):
        import imports_a_drawer  # noqa: F401  (its drawing import is done already)

        random.random()  # a draw of the block's own, not an import's
        np.random.rand()
    assert found == []
    import draws_at_import_np  # noqa: F401

    assert found == []


def test_codedags_own_imports_are_not_noted(modules: None) -> None:
    """rich, imported for codedag's logs with the random state put back, draws nothing from a
    script that never imports it."""
    from codedag.util.import_draws import own_imports

    found: list[ImportDraw] = []
    with noting_import_draws(found), own_imports():
        importlib.import_module("imports_a_drawer")
    assert found == []
