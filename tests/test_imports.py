"""codedag has no import cycles: every module imports, and the graph of its imports
(module-level and function-level, typing-only included) is acyclic."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import codedag

ROOT = Path(codedag.__file__).parent
PACKAGE = "codedag"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


# codedag.__main__ runs the CLI; the example training scripts run as scripts (codedag mutate)
SCRIPTS = ("__main__.py", "energy/examples/")
MODULES = {
    _module_name(p): p
    for p in sorted(ROOT.rglob("*.py"))
    if not str(p.relative_to(ROOT)).startswith(SCRIPTS) and p.name != "__main__.py"
}


def _imports(name: str, path: Path) -> set[str]:
    """Modules of ``codedag.migrate`` that ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    base = name if is_package else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                anchor = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                module = f"{anchor}.{module}" if module else anchor
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target in MODULES and target != name:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_is_acyclic() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert len(graph) > 200
    assert "codedag.backends.contract" in graph
    # the contract is the leaf: only the value types and the library facts, for annotations
    assert graph["codedag.backends.contract"] <= {
        "codedag.backends.device_values",
        "codedag.backends.facts",
        "codedag.errors",
    }
    # a library package's facts are plain data, read before any backend
    assert not graph["codedag.backends.facts"]
    for name in [
        n for n in graph if n.startswith("codedag.backends.ops.") and n.endswith(".facts")
    ]:
        assert graph[name] == {"codedag.backends.facts"}, name
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


@pytest.mark.slow
def test_every_module_imports_first() -> None:
    """Every module imports: one interpreter walks them in order, another in reverse order.
    What one module imported before another cannot change is ruled out by the acyclic graph
    above (it reads every import statement), so a fresh interpreter per module adds nothing."""

    def script(names: list[str]) -> str:
        return (
            "import importlib, sys\n"
            f"names = {names!r}\n"
            "failed = []\n"
            "for name in names:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as e:\n"
            "        failed.append(f'{name}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(failed))\n"
            "sys.exit(1 if failed else 0)\n"
        )

    names = sorted(MODULES)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script(order)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for order in (names, names[::-1])
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out


def test_importing_the_registry_does_not_import_torch() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, codedag.backends.registry, codedag.backends.contract; "
            "print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_the_tables_derived_from_the_library_packages_import_no_library() -> None:
    """The tracer, the name index and the calibration key read the library packages' facts
    without importing a library or a backend (the packages' ``__init__`` imports torch)."""
    script = (
        "import sys\n"
        "import codedag.backends.names as names, codedag.trace.filter as trace_filter\n"
        "import codedag.trace.interpose as interpose, codedag.trace.value_nodes as value_nodes\n"
        "import codedag.calibrate.environment as environment, codedag.backends.registry as r\n"
        "assert 'cv2' in names.INDEXED_MODULES and 'librosa' in trace_filter.KNOWN_LIBRARIES\n"
        "assert 'numpy' in interpose.WRAPPED_MODULES and len(value_nodes.DATA_BASES) >= 3\n"
        "assert 'cv2.imread' in r.NON_MIGRATABLE and 'numpy.random.' in r.RANDOM_PREFIXES\n"
        "assert 'scipy' in environment.library_versions('librosa.stft')\n"
        "names.canonical_name(len)\n"
        "heavy = ('torch', 'cv2', 'librosa', 'PIL', 'scipy')\n"
        "packages = [f'codedag.backends.ops.{p}' for p in ('cv2', 'numpy', 'pil', 'audio')]\n"
        "print(sorted(m for m in (*heavy, *packages) if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
