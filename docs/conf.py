"""Sphinx configuration of the documentation site: ``python3 -m nox -s docs`` builds it into
``build/docs/`` with warnings as errors.

Sphinx rather than MkDocs: the packages' docstrings are reStructuredText with Sphinx's roles
(``:class:`...```, ``:func:`...```, ````code````), which autodoc renders as written, and the
Markdown pages (the package READMEs and guides, kept beside the code they describe) go through
MyST. The source directory is the repository root, limited by ``include_patterns`` to those
pages, so a guide is one file in one place, linked the same on GitHub and on the site.
"""

from __future__ import annotations

project = "arraycore + nnlayers"
author = "the arraycore + nnlayers authors"
copyright = "2026, the arraycore + nnlayers authors"  # noqa: A001

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
root_doc = "docs/index"
include_patterns = [
    "docs/*.md",
    "docs/api/*.md",
    "README.md",
    "packages/*/README.md",
    "packages/arraycore/docs/*.md",
    "packages/nnlayers/docs/*.md",
    "packages/nnlayers/examples/README.md",
]
exclude_patterns = ["build/**", "**/.nox/**", "**/node_modules/**"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = "arraycore + nnlayers"
html_copy_source = False
