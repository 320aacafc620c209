"""The layering bounds of docs/internals.md ("Layers"), kept once reached.

Measured by docs/_scripts/import_cycles.py (it reads the source with ast; nothing of
gactors is imported): the largest import cycle counting ``TYPE_CHECKING`` imports, the
size of the modules, and the number of ``type: ignore`` comments in gactors/.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gactors"

MAX_CYCLE = 8
MAX_LINES = 800
MAX_TYPE_IGNORES = 15


@pytest.fixture(scope="module")
def measure() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_cycles", ROOT / "docs" / "_scripts" / "import_cycles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_cycles"] = module
    spec.loader.exec_module(module)
    return module


def test_the_run_time_imports_form_no_cycle(measure: ModuleType) -> None:
    assert measure.largest_cycle(PACKAGE, with_typing=False) == []


def test_the_largest_cycle_counting_type_checking_imports_is_small(
    measure: ModuleType,
) -> None:
    cycle = measure.largest_cycle(PACKAGE, with_typing=True)
    assert len(cycle) <= MAX_CYCLE, (
        f"{len(cycle)} modules import each other (TYPE_CHECKING imports counted), more "
        f"than {MAX_CYCLE}: {' '.join(cycle)}; type the lower ones against the "
        "protocols of gactors/_spi.py"
    )


def test_no_module_is_over_800_lines(measure: ModuleType) -> None:
    long = measure.long_files(PACKAGE, MAX_LINES)
    assert long == {}, f"split these by concern: {long}"


def test_few_type_ignores(measure: ModuleType) -> None:
    ignores = measure.type_ignores(PACKAGE)
    count = sum(map(len, ignores.values()))
    assert count <= MAX_TYPE_IGNORES, f"{count} type: ignore comments: {ignores}"


def test_the_measures_see_what_they_measure(measure: ModuleType, tmp_path: Path) -> None:
    # A package made up for the measures: a typing-only cycle of three modules, a long
    # file, and one real ignore next to one in a string.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
    )
    (pkg / "c.py").write_text(
        "import pkg.a\nx = 1  # type: ignore[misc]\ny = '# type: ignore'\n" + "z = 0\n" * 801
    )
    assert measure.largest_cycle(pkg, with_typing=False) == []
    assert measure.largest_cycle(pkg, with_typing=True) == ["pkg.a", "pkg.b", "pkg.c"]
    assert measure.long_files(pkg, 800) == {"pkg/c.py": 804}
    assert measure.type_ignores(pkg) == {"pkg/c.py": [2]}


def test_what_moved_below_the_strategies_is_still_found_where_it_was() -> None:
    # Directive and ChildRestartStats moved to gactors/_decisions.py (so that the cell's
    # concerns and the event stream need not import the strategies): the old module
    # re-exports them, and a directive pickled by an older release still loads.
    import pickle

    import gactors
    from gactors import _supervision

    assert _supervision.Directive is gactors.Directive
    assert _supervision.ChildRestartStats is gactors.ChildRestartStats
    old = (
        b"\x80\x04\x954\x00\x00\x00\x00\x00\x00\x00\x8c\x14gactors._supervision\x94"
        b"\x8c\tDirective\x94\x93\x94\x8c\x07restart\x94\x85\x94R\x94."
    )
    assert pickle.loads(old) is gactors.Directive.RESTART
