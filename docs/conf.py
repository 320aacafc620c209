"""Sphinx configuration of the gactors documentation.

Built in CI with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (tox -e
docs): every warning is an error. The build needs no network access.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

HERE = Path(__file__).resolve().parent
# Build from a checkout without installing: the package is one directory up.
sys.path.insert(0, str(HERE.parent))

import gactors  # noqa: E402

project = "gactors"
author = "The gactors developers"
copyright = "the gactors developers"
release = gactors.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_scripts", "_code", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# -- MyST -----------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "attrs_inline"]
myst_heading_anchors = 3  # links such as backoff.md#the-delay

# -- autodoc --------------------------------------------------------------------------------
autodoc_default_options = {
    "members": True,
    "undoc-members": False,
    "show-inheritance": False,
    "member-order": "bysource",
}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
autoclass_content = "class"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# -- HTML -----------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"gactors {release}"
html_static_path = ["_static"]
pygments_style = "sphinx"
pygments_dark_style = "monokai"


# -- hooks ------------------------------------------------------------------------------------
def _strip_trailing_blank_lines(app: object, doctree: nodes.document) -> None:
    """Included code regions end before a marker comment, often after blank lines."""
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if block.get("source") and text != text.rstrip("\n"):
            stripped = text.rstrip("\n")
            # rawsource must match the text, or the HTML writer does not highlight it.
            block.rawsource = stripped
            block.children = [nodes.Text(stripped)]


# Pages other engineers are still writing: listed in the index's toctree as soon as the
# file exists (a toctree entry for a missing page, or a page in no toctree, would each be
# a warning, hence an error). Page -> the index entry it follows.
OPTIONAL_PAGES = {"reliability": "performance"}


def _add_optional_pages(app: object, docname: str, source: list[str]) -> None:
    if docname != "index":
        return
    for page, after in OPTIONAL_PAGES.items():
        if (HERE / f"{page}.md").exists() and f"\n{page}\n" not in source[0]:
            source[0] = source[0].replace(f"\n{after}\n", f"\n{after}\n{page}\n", 1)


def setup(app: Sphinx) -> None:
    # The package's attribute docstrings are prose: a first line such as "Seconds: ..."
    # is not "type: description". Napoleon would split it, so it is kept for functions
    # and classes (Google-style sections) but not run on attributes.
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners.get("autodoc-process-docstring", [])):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)

            def process(*args: Any, _napoleon: Any = listener.handler) -> None:
                what = args[1]
                if what not in {"attribute", "data", "property"}:
                    _napoleon(*args)

            app.connect("autodoc-process-docstring", process, priority=listener.priority)
    app.connect("doctree-read", _strip_trailing_blank_lines)
    app.connect("source-read", _add_optional_pages)
