"""Render the transition table of :mod:`consumer.member.states` as a Mermaid state diagram.

``python -m consumer.member.diagram`` prints the diagram; ``--write`` refreshes the copy between the
marker comments in ``docs/concepts/member-state-machine.md`` (``--check`` exits 1 when it is stale).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from consumer.member.states import TRANSITIONS, MemberState

BEGIN_MARKER = "<!-- BEGIN GENERATED: member-state-diagram -->"
END_MARKER = "<!-- END GENERATED: member-state-diagram -->"
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "member-state-machine.md"


def render_mermaid() -> str:
    """The ``stateDiagram-v2`` source for :data:`~consumer.member.states.TRANSITIONS`.

    Rows sharing source and destination are merged into one edge whose label lists the triggers.
    """
    edges: dict[tuple[MemberState, MemberState], list[str]] = {}
    for row in TRANSITIONS:
        labels = edges.setdefault((row.source, row.dest), [])
        if row.trigger.value not in labels:
            labels.append(row.trigger.value)
    lines = ["stateDiagram-v2", f"    [*] --> {MemberState.UNSUBSCRIBED.name}"]
    for (source, dest), labels in edges.items():
        lines.append(f"    {source.name} --> {dest.name} : {', '.join(labels)}")
    lines.append(f"    {MemberState.FATAL.name} --> [*]")
    return "\n".join(lines) + "\n"


def render_block() -> str:
    """The generated block as it appears in the document, markers included."""
    return f"{BEGIN_MARKER}\n```mermaid\n{render_mermaid()}```\n{END_MARKER}"


def replace_block(document: str) -> str:
    """Return ``document`` with the text between the markers replaced by a fresh rendering."""
    start = document.index(BEGIN_MARKER)
    end = document.index(END_MARKER) + len(END_MARKER)
    return document[:start] + render_block() + document[end:]


def extract_block(document: str) -> str:
    """The generated block currently in ``document`` (markers included)."""
    start = document.index(BEGIN_MARKER)
    end = document.index(END_MARKER) + len(END_MARKER)
    return document[start:end]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="refresh the diagram in the doc")
    group.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    parser.add_argument("--doc", type=Path, default=DOC_PATH, help="document to update")
    args = parser.parse_args(argv)
    if args.write or args.check:
        text = args.doc.read_text(encoding="utf-8")
        fresh = replace_block(text)
        if args.check:
            return 0 if fresh == text else 1
        args.doc.write_text(fresh, encoding="utf-8")
        return 0
    sys.stdout.write(render_mermaid())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
