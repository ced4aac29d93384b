"""Griffe extension: the reST of the package's docstrings, made readable for mkdocstrings.

The docstrings name other objects as ``:class:`~consumer.errors.ConsumerError```,
``:meth:`commit``` and so on. mkdocstrings reads Markdown, where such a role would show as raw
text, so each one is rewritten to an *optional* autorefs link: a link when the target has a
reference entry, plain code (and no warning) when it has none. ``~`` keeps the last part of the
name as the text, as in Sphinx. A literal-block marker (``Typical use::`` or a lone ``::``) loses
its ``::``: the indented block after it is already a Markdown code block.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|const):`(~?)([\w.]+)`")
LONE_LITERAL_MARKER = re.compile(r"^[ \t]*::[ \t]*$\n?", flags=re.MULTILINE)
TRAILING_LITERAL_MARKER = re.compile(r"(\S)::[ \t]*$", flags=re.MULTILINE)


def _identifier(name: str, obj: griffe.Object) -> str:
    if name.startswith("consumer.") or name == "consumer":
        return name
    scope = obj if obj.is_class or obj.is_module else obj.parent
    return f"{scope.path}.{name}" if scope is not None else name


def rewrite(text: str, obj: griffe.Object) -> str:
    """``text`` with every cross-reference role replaced by an optional autorefs link."""

    def replace(match: re.Match[str]) -> str:
        short, name = match.group(1) == "~", match.group(2)
        title = name.rsplit(".", 1)[-1] if short else name
        identifier = _identifier(name, obj)
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    text = LONE_LITERAL_MARKER.sub("", text)
    text = TRAILING_LITERAL_MARKER.sub(r"\1:", text)
    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value, obj)
