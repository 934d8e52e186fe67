"""codedag.devices is a foundation: of codedag it imports only itself, codedag.errors,
codedag.util and codedag.version (a leaf that imports nothing of codedag), anywhere in its source,
function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import codedag.devices

ROOT = Path(codedag.devices.__file__).parent
ALLOWED = ("codedag.devices", "codedag.errors", "codedag.util", "codedag.version")


def codedag_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.add("codedag<relative import>")  # the house style is absolute imports
    return {name for name in found if name == "codedag" or name.startswith("codedag.")}


def test_devices_imports_only_foundations_below_it() -> None:
    modules = sorted(ROOT.rglob("*.py"))
    assert len(modules) >= 10
    outside = {
        f"{path.name}: {name}"
        for path in modules
        for name in codedag_imports(path)
        if not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED)
    }
    assert outside == set()


def test_the_version_module_it_may_import_is_a_leaf() -> None:
    import codedag.version

    assert codedag_imports(Path(codedag.version.__file__)) == set()
