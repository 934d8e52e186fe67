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
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.util.import_draws import (
    ImportDraw,
    draws_line,
    noting_import_draws,
    replay_in_forked_children,
    stop_replaying,
)

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
    assert found == [  # getrandbits(24) takes a word, a NumPy double two
        ImportDraw("draws_at_import_py", "imports_a_drawer", (1, 0)),
        ImportDraw("draws_at_import_np", "draws_at_import_np", (0, 2)),
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


class LazyImports(Dataset):  # type: ignore[type-arg]
    """Each sample imports its modules where it uses them, after the worker's seeding, and
    draws after that: a module whose import draws moves every draw after it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        import draws_at_import_np  # noqa: F401
        import imports_a_drawer  # noqa: F401

        return torch.tensor([random.random(), float(np.random.rand()), float(index)])


def _epochs(workers: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    loader = DataLoader(LazyImports(), batch_size=4, num_workers=workers)
    return [batch for _ in range(2) for batch in loader]


def test_a_drawing_import_is_made_again_in_each_worker_forked_after_codedag_made_it(
    modules: None,
) -> None:
    """DataLoader workers forked after codedag imported (and put the parent's state back)
    draw what the script's own workers draw, where their code first imports the modules; a
    worker forked before, or after :func:`stop_replaying`, inherits the modules as they are."""
    own = _epochs(2)
    assert "imports_a_drawer" not in sys.modules  # only the workers imported it
    np.random.seed(0)
    found: list[ImportDraw] = []
    python, numpy = random.getstate(), np.random.get_state()
    with noting_import_draws(found):
        importlib.import_module("imports_a_drawer")
        importlib.import_module("draws_at_import_np")
    random.setstate(python)
    np.random.set_state(numpy)
    try:
        assert replay_in_forked_children(found) == []  # every draw can be made again
        got = _epochs(2)
    finally:
        stop_replaying()
    assert all(map(torch.equal, got, own))
    inherited = _epochs(2)  # the modules as the parent has them: no draw at import
    assert not all(map(torch.equal, inherited, own))
    assert sys.modules["imports_a_drawer"].VALUE == 1


def test_a_draw_that_is_not_whole_words_is_not_made_again(modules: None) -> None:
    (path,) = [p for p in sys.path if (Path(p) / "draws_nothing_at_import.py").exists()]
    (Path(path) / "draws_a_gaussian.py").write_text(
        "import random\nNOISE = random.gauss(0, 1)\n", encoding="utf-8"
    )
    found: list[ImportDraw] = []
    try:
        with noting_import_draws(found):
            importlib.import_module("draws_a_gaussian")
    finally:
        sys.modules.pop("draws_a_gaussian", None)
    # random.gauss keeps its second value for the next call: no count of words gives it
    assert found == [ImportDraw("draws_a_gaussian", "draws_a_gaussian", None)]
    assert replay_in_forked_children(found) == found
