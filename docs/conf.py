"""Sphinx configuration of the gactors documentation.

Built in CI with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` (tox -e
docs): every warning is an error. The build needs no network access.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    "show-inheritance": True,
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
