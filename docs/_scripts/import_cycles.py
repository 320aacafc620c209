"""Measure the layering of gactors (docs/internals.md, "Layers").

Reads the source with :mod:`ast` (imports nothing of gactors) and prints:

* the largest strongly connected component of the module import graph, twice:
  counting only the imports that run (module level and inside functions) and also
  counting those under ``if TYPE_CHECKING:``. ``from pkg import sub`` is an edge to the
  submodule ``pkg.sub`` (not to ``pkg``, whose ``__init__`` Python runs first anyway,
  like for any submodule);
* the imports from a core module (anything outside :data:`EXTENSIONS` and
  :data:`ABOVE_CORE`) into an extension or contrib, run-time and typing-only;
* the files over :data:`MAX_LINES` lines;
* the number of ``type: ignore`` comments.

tests/test_layers.py keeps the bounds with the same functions. Run from the
repository root::

    python docs/_scripts/import_cycles.py [PACKAGE_DIR]     # default: gactors
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

# The extension packages (docs/internals.md, "Layers"); a core module imports none of
# them, nor contrib.
EXTENSIONS = ("cluster", "persistence", "reminders", "delivery")
# Above the core too, but no extension: contrib and the applications.
ABOVE_CORE = ("contrib", "__main__", "_demo", "_demo_cluster")
# The size above which a module is split by concern (docs/internals.md).
MAX_LINES = 800


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(tree: ast.Module, name: str, is_package: bool) -> list[tuple[str, bool]]:
    """(imported name, under TYPE_CHECKING) for every import statement of a module."""
    out: list[tuple[str, bool]] = []
    package = name if is_package else name.rpartition(".")[0]

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            out.extend((alias.name, typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            # ``from pkg import sub`` imports the submodule pkg.sub if there is one
            # (resolved by build_graph), else a name of pkg itself.
            out.extend((f"{mod}:{alias.name}", typing_only) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return out


def build_graph(root: Path, with_typing: bool) -> dict[str, set[str]]:
    files = {module_name(root, p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, typing_only in imports_of(tree, mod, path.name == "__init__.py"):
            if typing_only and not with_typing:
                continue
            base, _, attr = target.partition(":")
            target = f"{base}.{attr}" if attr and f"{base}.{attr}" in files else base
            if target in files and target != mod:
                graph[mod].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def largest_cycle(root: Path, with_typing: bool) -> list[str]:
    """The modules of the largest import cycle (empty when there is none)."""
    largest = max(strongly_connected(build_graph(root, with_typing)), key=len)
    return largest if len(largest) > 1 else []


def _top(root: Path, module: str) -> str:
    """The first component below the root package (``cluster`` for gactors.cluster._x)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def core_to_extension(root: Path, with_typing: bool) -> list[tuple[str, str]]:
    """(importer, imported) for every import of an extension or contrib by the core."""
    graph = build_graph(root, with_typing)
    out = []
    for mod, targets in sorted(graph.items()):
        if _top(root, mod) in EXTENSIONS + ABOVE_CORE:
            continue
        out.extend((mod, t) for t in sorted(targets) if _top(root, t) in (*EXTENSIONS, "contrib"))
    return out


def long_files(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Relative path -> number of lines, for every module over *limit* lines."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out[path.relative_to(root.parent).as_posix()] = lines
    return out


def type_ignores(root: Path) -> dict[str, list[int]]:
    """Relative path -> line numbers of its ``# type: ignore`` comments (real comments,
    found by :mod:`tokenize`: not the words in a string or a docstring)."""
    out: dict[str, list[int]] = {}
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and "type: ignore" in tok.string:
                out.setdefault(path.relative_to(root.parent).as_posix(), []).append(tok.start[0])
    return out


def main(argv: list[str]) -> None:
    root = Path(argv[0] if argv else "gactors").resolve()
    modules = len(build_graph(root, False))
    for with_typing in (False, True):
        largest = largest_cycle(root, with_typing)
        label = "with TYPE_CHECKING imports" if with_typing else "run-time imports only"
        print(f"{label}: {modules} modules, largest cycle {len(largest)} module(s)")
        if largest:
            print("  " + " ".join(largest))
    for with_typing in (False, True):
        edges = core_to_extension(root, with_typing)
        label = "with TYPE_CHECKING imports" if with_typing else "run-time imports only"
        print(f"core -> extension/contrib imports, {label}: {len(edges)}")
        for importer, imported in edges:
            print(f"  {importer} -> {imported}")
    long = long_files(root)
    print(f"files over {MAX_LINES} lines: {len(long)}")
    for name, lines in long.items():
        print(f"  {name}: {lines}")
    ignores = type_ignores(root)
    print(f"type: ignore comments: {sum(map(len, ignores.values()))}")
    for name, numbers in sorted(ignores.items(), key=lambda kv: -len(kv[1])):
        print(f"  {name}: {len(numbers)}")


if __name__ == "__main__":
    main(sys.argv[1:])
