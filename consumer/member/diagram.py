"""Render the member's tables (states, rules, round phases) as Mermaid diagrams and Markdown.

``python -m consumer.member.diagram`` prints the generated block; ``--write`` refreshes the copy
between the marker comments in ``docs/concepts/member-state-machine.md`` (``--check`` exits 1 when
it is stale). Nothing in the block is typed by hand: it is all read from
:mod:`consumer.member.states` and :mod:`consumer.member.rules`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from consumer.member.rules import PHASES, ROUND_STEPS, RULES, RoundKind
from consumer.member.states import STATES, MemberState

BEGIN_MARKER = "<!-- BEGIN GENERATED: member-state-diagram -->"
END_MARKER = "<!-- END GENERATED: member-state-diagram -->"
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "member-state-machine.md"


def _label(outcome_name: str, guard_name: str | None) -> str:
    label = outcome_name.lower()
    return label if guard_name is None else f"{label} [{guard_name.lower()}]"


def render_mermaid() -> str:
    """The ``stateDiagram-v2`` source of the rules table: one edge per (from, to) pair.

    Rows sharing source and destination are merged into one edge listing their outcomes (with
    the guard in brackets); rows that stay in their state are in the rules table only.
    """
    edges: dict[tuple[MemberState, MemberState], list[str]] = {}
    for row in RULES.rows:
        label = _label(row.outcome.name, None if row.guard is None else row.guard.name)
        for source in row.sources:
            if row.target(source) is source:
                continue
            labels = edges.setdefault((source, row.target(source)), [])
            if label not in labels:
                labels.append(label)
    lines = ["stateDiagram-v2", f"    [*] --> {MemberState.UNSUBSCRIBED.name}"]
    for (source, dest), labels in edges.items():
        lines.append(f"    {source.name} --> {dest.name} : {', '.join(labels)}")
    lines.append(f"    {MemberState.FATAL.name} --> [*]")
    return "\n".join(lines) + "\n"


def render_round_mermaid() -> str:
    """The phases of each kind of round, as a ``stateDiagram-v2`` (skippable phases say when)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for kind in RoundKind:
        chain = ["[*]", *(phase.name for phase in ROUND_STEPS[kind]), "[*]"]
        for source, dest in zip(chain, chain[1:], strict=False):
            labels = edges.setdefault((source, dest), [])
            labels.append(kind.value)
    lines = ["stateDiagram-v2"]
    for (source, dest), labels in edges.items():
        lines.append(f"    {source} --> {dest} : {', '.join(labels)}")
    return "\n".join(lines) + "\n"


def render_tables() -> str:
    """The states, rules and phases tables in Markdown."""
    out = ["### States", "", "| State | Heartbeats | In group | Meaning |", "|---|---|---|---|"]
    for state, info in STATES.items():
        in_group = "yes" if info.in_group else "no"
        out.append(f"| {state.name} | {info.heartbeats.value} | {in_group} | {info.description} |")
    out += ["", "### Rules", "", "| From | Outcome | If | To | Effects | When |"]
    out.append("|---|---|---|---|---|---|")
    for row in RULES.rows:
        sources = ", ".join(state.name for state in row.sources)
        guard = "" if row.guard is None else row.guard.value
        dest = "(stays)" if row.dest is None else row.dest.name
        effects = ", ".join(effect.name.lower() for effect in row.effects) or "-"
        out.append(
            f"| {sources} | {row.outcome.name} | {guard} | {dest} | {effects} | {row.when} |"
        )
    out += ["", "### Round phases", "", "| Phase | Sends | Waits for | Skipped when | Timed |"]
    out.append("|---|---|---|---|---|")
    for phase, phase_info in PHASES.items():
        skip = "never" if phase_info.skipped_when is None else phase_info.skipped_when.value
        timed = "rebalance timeout" if phase_info.bounded else "-"
        out.append(
            f"| {phase.name} | {phase_info.sends} | {phase_info.waits_for} | {skip} | {timed} |"
        )
    return "\n".join(out) + "\n"


def render_block() -> str:
    """The generated block as it appears in the document, markers included."""
    return (
        f"{BEGIN_MARKER}\n```mermaid\n{render_mermaid()}```\n\n"
        f"Round phases (reconcile, revoke-all, lose-all):\n\n"
        f"```mermaid\n{render_round_mermaid()}```\n\n{render_tables()}{END_MARKER}"
    )


def _span(document: str) -> tuple[int, int]:
    start = document.index(BEGIN_MARKER)
    return start, document.index(END_MARKER) + len(END_MARKER)


def replace_block(document: str) -> str:
    """Return ``document`` with the text between the markers replaced by a fresh rendering."""
    start, end = _span(document)
    return document[:start] + render_block() + document[end:]


def extract_block(document: str) -> str:
    """The generated block currently in ``document`` (markers included)."""
    start, end = _span(document)
    return document[start:end]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="refresh the block in the doc")
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
    sys.stdout.write(render_block() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
