"""The import direction of the code: every import (module level or inside a function) of a
project module goes down the layers, and no module imports itself back through others.

Layers, bottom first (README, "Architecture"); each may import the ones it lists::

    base      casstore.errors, .digest, .names, .progress, .inputs, .bounds, .jsontext
    archive   casstore.archive        base
    verifier  casstore.verifier       base, archive (the runner and helpers it writes into a
                                      task import nothing of casstore)
    examples  casstore.examples       base
    sandbox   casstore.sandbox        base (and Harbor: the host environment for Harbor jobs)
    store     casstore.store          base, archive
    table     casstore.table          base (the reward table: import's output, scoring's input)
    trials    casstore.trials         base, archive, store, table
    remote    casstore.remote         base, archive, store, table, trials (S3 remotes)
    scoring   scoring                 base, table (it reads the reward table only)
    bundle    casstore.bundle         base, archive, table, trials, scoring (run bundles,
                                      read back as sources, GAGE export)
    sources   casstore.sources        every layer above but api and cli
    comparison casstore.comparison    every layer below api, and sources
    report    casstore.report         every layer below api, sources and comparison
    run       casstore.run            every layer below api, and sources (`casstore run`)
    api       casstore (the package)  every layer but cli
    cli       cli                     every layer
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("casstore", "scoring", "cli")

# (layer, module prefixes); a module belongs to the layer of its longest matching prefix
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "casstore.errors",
            "casstore.digest",
            "casstore.names",
            "casstore.progress",
            "casstore.lazy",
            "casstore.inputs",
            "casstore.bounds",
            "casstore.jsontext",
        ),
    ),
    ("archive", ("casstore.archive",)),
    ("verifier", ("casstore.verifier",)),
    ("standalone", ("casstore.verifier.run_verifier", "casstore.verifier.helpers")),
    ("examples", ("casstore.examples",)),
    ("sandbox", ("casstore.sandbox",)),
    ("store", ("casstore.store",)),
    ("table", ("casstore.table",)),
    ("trials", ("casstore.trials",)),
    ("remote", ("casstore.remote",)),
    ("scoring", ("scoring",)),
    ("bundle", ("casstore.bundle",)),
    ("sources", ("casstore.sources", "casstore.origins")),
    ("comparison", ("casstore.comparison",)),
    ("report", ("casstore.report",)),
    ("run", ("casstore.run",)),
    ("api", ("casstore",)),
    ("cli", ("cli",)),
)
BELOW_API = {
    "base",
    "archive",
    "verifier",
    "examples",
    "sandbox",
    "store",
    "table",
    "trials",
    "remote",
    "scoring",
    "bundle",
}
MAY_IMPORT: dict[str, set[str]] = {
    "base": set(),
    "archive": {"base"},
    "verifier": {"base", "archive"},
    "standalone": set(),
    "examples": {"base"},
    "sandbox": {"base"},
    "store": {"base", "archive"},
    "table": {"base"},
    "trials": {"base", "archive", "store", "table"},
    "remote": {"base", "archive", "store", "table", "trials"},
    "scoring": {"base", "table"},
    "bundle": {"base", "archive", "table", "trials", "scoring"},
    "sources": BELOW_API,
    "comparison": BELOW_API | {"sources"},
    "report": BELOW_API | {"sources", "comparison"},
    "run": BELOW_API | {"sources"},
    "api": BELOW_API | {"sources", "comparison", "report", "run"},
    "cli": BELOW_API | {"sources", "comparison", "report", "run", "api"},
}


def _modules() -> dict[str, Path]:
    """Every module of the project's packages: dotted name → file."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> str:
    """The layer of a project module (longest matching prefix)."""
    best, length = None, -1
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = layer, len(prefix)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def _resolve(name: str) -> str | None:
    """The project module an imported dotted name refers to (a module, or a name in one)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str) -> Iterator[tuple[int, str]]:
    """``(line, project module)`` of every import in ``module``, at any depth."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                yield node.lineno, target


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 60
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module: str) -> None:
    layer = layer_of(module)
    wrong = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {target} ({layer_of(target)})"
        for line, target in imports_of(module)
        if layer_of(target) != layer and layer_of(target) not in MAY_IMPORT[layer]
    ]
    assert not wrong, f"{module} ({layer}) may import {sorted(MAY_IMPORT[layer])} only"


def test_no_import_cycle() -> None:
    """No cycle through any import, at module level or inside a function: a deferred import
    never dodges a cycle. A package's own ``__init__`` importing its modules is not a cycle
    when they import their siblings directly (not through the package)."""
    graph = {module: {target for _, target in imports_of(module)} for module in MODULES}
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The walk finds imports inside functions (the ones that used to hide cycles)."""
    found = dict((target, line) for line, target in imports_of("scoring._metric_script"))
    assert "casstore.errors" in found
    module = "casstore.archive.read"
    assert {"casstore.archive.extract", "casstore.errors"} <= {t for _, t in imports_of(module)}
