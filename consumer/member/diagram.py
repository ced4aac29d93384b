"""Render a member kind's tables (states, rules, round phases) as Mermaid diagrams and Markdown.

Two pages are generated, one per member kind: the consumer member's
(``docs/concepts/member-state-machine.md``, from :mod:`consumer.member.states` and
:mod:`consumer.member.rules`) and the share member's
(``docs/concepts/share-member-state-machine.md``, from :mod:`consumer.share.diagram`).
``python -m consumer.member.diagram`` prints the generated blocks; ``--write`` refreshes the copy
between the marker comments of every page (``--check`` exits 1 when one is stale; ``--page``
picks one page, ``--doc`` another file for it). Nothing in a block is typed by hand.
"""

from __future__ import annotations

import argparse
import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumer.member.machine import RulesTable
from consumer.member.rules import PHASES, ROUND_STEPS, RULES
from consumer.member.states import STATES, MemberState, StateInfo

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "concepts"


@dataclass(frozen=True)
class DiagramPage:
    """What one generated page shows, read from a member kind's tables.

    ``phase_rows`` are the rows of the round-phases table: (phase, sends, waits for, skipped
    when, timed).
    """

    key: str
    doc_path: Path
    states: Mapping[Any, StateInfo]
    rules: RulesTable[Any, Any, Any, Any]
    initial: enum.Enum
    terminal: enum.Enum
    round_steps: Mapping[Any, tuple[enum.Enum, ...]]
    phase_rows: tuple[tuple[str, str, str, str, str], ...]

    @property
    def begin_marker(self) -> str:
        """The comment that opens the generated block."""
        return f"<!-- BEGIN GENERATED: {self.key} -->"

    @property
    def end_marker(self) -> str:
        """The comment that closes the generated block."""
        return f"<!-- END GENERATED: {self.key} -->"


#: The consumer member's page.
CONSUMER_PAGE = DiagramPage(
    key="member-state-diagram",
    doc_path=DOCS_DIR / "member-state-machine.md",
    states=STATES,
    rules=RULES,
    initial=MemberState.UNSUBSCRIBED,
    terminal=MemberState.FATAL,
    round_steps=ROUND_STEPS,
    phase_rows=tuple(
        (
            phase.name,
            info.sends,
            info.waits_for,
            "never" if info.skipped_when is None else info.skipped_when.value,
            "rebalance timeout" if info.bounded else "-",
        )
        for phase, info in PHASES.items()
    ),
)
BEGIN_MARKER = CONSUMER_PAGE.begin_marker
END_MARKER = CONSUMER_PAGE.end_marker
DOC_PATH = CONSUMER_PAGE.doc_path


def share_page() -> DiagramPage:
    """The share member's page (imported on use: the share core builds on this package)."""
    from consumer.share.diagram import SHARE_PAGE

    return SHARE_PAGE


def pages() -> dict[str, DiagramPage]:
    """Every generated page, by the name ``--page`` takes."""
    return {"consumer": CONSUMER_PAGE, "share": share_page()}


def _label(outcome_name: str, guard_name: str | None) -> str:
    label = outcome_name.lower()
    return label if guard_name is None else f"{label} [{guard_name.lower()}]"


def render_mermaid(page: DiagramPage = CONSUMER_PAGE) -> str:
    """The ``stateDiagram-v2`` source of the rules table: one edge per (from, to) pair.

    Rows sharing source and destination are merged into one edge listing their outcomes (with
    the guard in brackets); rows that stay in their state are in the rules table only.
    """
    edges: dict[tuple[enum.Enum, enum.Enum], list[str]] = {}
    for row in page.rules.rows:
        label = _label(row.outcome.name, None if row.guard is None else row.guard.name)
        for source in row.sources:
            if row.target(source) is source:
                continue
            labels = edges.setdefault((source, row.target(source)), [])
            if label not in labels:
                labels.append(label)
    lines = ["stateDiagram-v2", f"    [*] --> {page.initial.name}"]
    for (source, dest), labels in edges.items():
        lines.append(f"    {source.name} --> {dest.name} : {', '.join(labels)}")
    lines.append(f"    {page.terminal.name} --> [*]")
    return "\n".join(lines) + "\n"


def render_round_mermaid(page: DiagramPage = CONSUMER_PAGE) -> str:
    """The phases of each kind of round, as a ``stateDiagram-v2``."""
    edges: dict[tuple[str, str], list[str]] = {}
    for kind, steps in page.round_steps.items():
        chain = ["[*]", *(phase.name for phase in steps), "[*]"]
        for source, dest in zip(chain, chain[1:], strict=False):
            labels = edges.setdefault((source, dest), [])
            labels.append(kind.value)
    lines = ["stateDiagram-v2"]
    for (source, dest), labels in edges.items():
        lines.append(f"    {source} --> {dest} : {', '.join(labels)}")
    return "\n".join(lines) + "\n"


def render_tables(page: DiagramPage = CONSUMER_PAGE) -> str:
    """The states, rules and phases tables in Markdown."""
    out = ["### States", "", "| State | Heartbeats | In group | Meaning |", "|---|---|---|---|"]
    for state, info in page.states.items():
        in_group = "yes" if info.in_group else "no"
        out.append(f"| {state.name} | {info.heartbeats.value} | {in_group} | {info.description} |")
    out += ["", "### Rules", "", "| From | Outcome | If | To | Effects | When |"]
    out.append("|---|---|---|---|---|---|")
    for row in page.rules.rows:
        sources = ", ".join(state.name for state in row.sources)
        guard = "" if row.guard is None else row.guard.value
        dest = "(stays)" if row.dest is None else row.dest.name
        effects = ", ".join(effect.name.lower() for effect in row.effects) or "-"
        out.append(
            f"| {sources} | {row.outcome.name} | {guard} | {dest} | {effects} | {row.when} |"
        )
    out += ["", "### Round phases", "", "| Phase | Sends | Waits for | Skipped when | Timed |"]
    out.append("|---|---|---|---|---|")
    out += [f"| {' | '.join(cells)} |" for cells in page.phase_rows]
    return "\n".join(out) + "\n"


def render_block(page: DiagramPage = CONSUMER_PAGE) -> str:
    """The generated block as it appears in the document, markers included."""
    kinds = ", ".join(kind.value for kind in page.round_steps)
    return (
        f"{page.begin_marker}\n```mermaid\n{render_mermaid(page)}```\n\n"
        f"Round phases ({kinds}):\n\n"
        f"```mermaid\n{render_round_mermaid(page)}```\n\n{render_tables(page)}{page.end_marker}"
    )


def _span(document: str, page: DiagramPage) -> tuple[int, int]:
    start = document.index(page.begin_marker)
    return start, document.index(page.end_marker) + len(page.end_marker)


def replace_block(document: str, page: DiagramPage = CONSUMER_PAGE) -> str:
    """Return ``document`` with the text between the markers replaced by a fresh rendering."""
    start, end = _span(document, page)
    return document[:start] + render_block(page) + document[end:]


def extract_block(document: str, page: DiagramPage = CONSUMER_PAGE) -> str:
    """The generated block currently in ``document`` (markers included)."""
    start, end = _span(document, page)
    return document[start:end]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="refresh the blocks in the docs")
    group.add_argument("--check", action="store_true", help="exit 1 if a doc is stale")
    parser.add_argument("--page", choices=("consumer", "share"), help="only this page")
    parser.add_argument("--doc", type=Path, help="document to update (default: the page's own)")
    args = parser.parse_args(argv)
    known = pages()
    if args.doc is not None and args.page is None:
        args.page = "consumer"
    chosen = [known[args.page]] if args.page else list(known.values())
    stale = False
    for page in chosen:
        if not (args.write or args.check):
            sys.stdout.write(render_block(page) + "\n")
            continue
        path = args.doc if args.doc is not None else page.doc_path
        text = path.read_text(encoding="utf-8")
        fresh = replace_block(text, page)
        if args.check:
            stale = stale or fresh != text
        else:
            path.write_text(fresh, encoding="utf-8")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
