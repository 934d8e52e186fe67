"""Every package's docstring maps its modules: a newcomer reads one docstring per folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import codedag

ROOT = Path(codedag.__file__).parent
PACKAGES = sorted(p.parent for p in ROOT.rglob("__init__.py"))


def _modules(package: Path) -> list[str]:
    names = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(n for n in names if n != "__main__")


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_the_package_docstring_names_every_module(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.relative_to(ROOT.parent)} has no docstring"
    missing = [m for m in _modules(package) if m not in doc]
    assert not missing, f"{package.relative_to(ROOT.parent)}: the docstring names no {missing}"
