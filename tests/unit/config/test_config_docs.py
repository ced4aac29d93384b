"""docs/reference/configuration.md holds exactly the key tables the parser is built from."""

from __future__ import annotations

from pathlib import Path

from consumer._config.doc import BEGIN_MARKER, END_MARKER, render_key_tables
from consumer._config.spec import CLASSIC_ONLY, REFUSED, accepted_keys

DOC = Path(__file__).parents[3] / "docs" / "reference" / "configuration.md"


def test_docs_embed_the_generated_tables() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(BEGIN_MARKER)
    end = text.index(END_MARKER) + len(END_MARKER) + 1
    assert text[start:end] == render_key_tables(), (
        "regenerate the tables: python -m consumer._config.doc"
    )


def test_docs_name_every_key() -> None:
    text = DOC.read_text(encoding="utf-8")
    for key in [*accepted_keys(), *CLASSIC_ONLY, *REFUSED]:
        assert f"| `{key}` |" in text, key
