"""Figures of the source's shape: lines per package, long functions, ``Any`` parameters, modules
no test imports, import cycles and imports against the stage order.

Usage::

    python benchmarks/code_figures.py [--json]

Nothing is asserted: it counts. ``bin/test`` enforces the layers themselves (import-linter).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "codedag"
TESTS = ROOT / "tests"
LONG_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def lines_per_package(modules: dict[str, Path]) -> dict[str, int]:
    """Source lines under each top-level package (modules at the root as their own name)."""
    counts: Counter[str] = Counter()
    for name, path in modules.items():
        parts = name.split(".")
        key = parts[1] if len(parts) > 1 else "codedag"
        counts[key] += len(path.read_text(encoding="utf-8").splitlines())
    return dict(counts.most_common())


def long_functions(modules: dict[str, Path]) -> list[str]:
    """Functions and methods longer than :data:`LONG_FUNCTION_LINES` lines."""
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONG_FUNCTION_LINES:
                    found.append(f"{name}.{node.name} ({length} lines)")
    return sorted(found)


def any_parameters(modules: dict[str, Path]) -> tuple[int, int, dict[str, float]]:
    """Named parameters (not self/cls, not ``*args``/``**kwargs``) annotated plainly ``Any``:
    count, total, share per package."""
    per_package: dict[str, list[int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name.split(".")[1] if "." in name else "codedag"
        tally = per_package.setdefault(package, [0, 0])
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            for param in params:
                if param.arg in ("self", "cls"):
                    continue
                tally[1] += 1
                if param.annotation is not None and ast.unparse(param.annotation) == "Any":
                    tally[0] += 1
    typed_any = sum(t[0] for t in per_package.values())
    total = sum(t[1] for t in per_package.values())
    shares = {p: round(100 * t[0] / t[1], 1) for p, t in per_package.items() if t[1]}
    return typed_any, total, shares


def _defined_names(path: Path) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def untested_modules(modules: dict[str, Path]) -> list[str]:
    """Modules no test names: none imports the module, or a name it defines from its package (a
    re-export), or names it in a string (``-m codedag.x``, a patch target); a CLI subcommand's
    module counts as named when a test runs that subcommand."""
    imported: set[str] = set()
    texts = []
    for path in TESTS.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
    corpus = "\n".join(texts)
    untested = []
    for name, path in modules.items():
        if path.name == "__init__.py" or name == "codedag.__main__" or name in imported:
            continue
        package = name.rsplit(".", 1)[0]
        if any(f"{package}.{n}" in imported for n in _defined_names(path)):
            continue
        if re.search(rf"\b{re.escape(name)}\b", corpus):
            continue
        command = name.removeprefix("codedag.cli.")
        if command != name and re.search(rf"[\[(,]\s*\"{re.escape(command)}\"", corpus):
            continue
        untested.append(name)
    return sorted(untested)


def import_cycles() -> list[list[str]]:
    """Import cycles between codedag's modules (grimp's graph; imports inside functions too)."""
    import grimp

    graph = grimp.build_graph("codedag")
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            path = graph.find_shortest_chain(importer=imported, imported=module)
            if path and frozenset(path) not in seen:
                seen.add(frozenset(path))
                cycles.append([module, *path])
    return cycles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    modules = _modules()
    typed_any, total, shares = any_parameters(modules)
    figures: dict[str, Any] = {
        "modules": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules.values()),
        "lines_per_package": lines_per_package(modules),
        "long_functions": long_functions(modules),
        "any_parameters": {"any": typed_any, "total": total, "share_pct": 100 * typed_any / total},
        "any_share_per_package_pct": shares,
        "untested_modules": untested_modules(modules),
        "import_cycles": import_cycles(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{figures['modules']} modules, {figures['lines']} lines")
    print(
        "lines per package: "
        + ", ".join(f"{k} {v}" for k, v in figures["lines_per_package"].items())
    )
    print(f"functions over {LONG_FUNCTION_LINES} lines: {len(figures['long_functions'])}")
    for entry in figures["long_functions"]:
        print(f"  {entry}")
    share = figures["any_parameters"]["share_pct"]
    print(f"parameters typed Any: {typed_any} of {total} ({share:.1f} %)")
    print("  per package: " + ", ".join(f"{k} {v} %" for k, v in sorted(shares.items())))
    print(f"modules no test imports: {len(figures['untested_modules'])}")
    for name in figures["untested_modules"]:
        print(f"  {name}")
    print(f"import cycles: {len(figures['import_cycles'])}")
    for cycle in figures["import_cycles"]:
        print("  " + " -> ".join(cycle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
