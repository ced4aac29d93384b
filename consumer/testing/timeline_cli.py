"""``kgm timeline plot FILE -o OUT.png``: draw a JSON-lines timeline (see :mod:`.plot`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_timeline_commands"]


def add_timeline_commands(commands: Any) -> None:
    """Add ``timeline`` and its subcommands to ``kgm``'s subparsers ``commands``."""
    timeline = commands.add_parser("timeline", help="work with rebalance timelines (JSON lines)")
    timeline_commands = timeline.add_subparsers(dest="timeline_command", required=True)
    plot = timeline_commands.add_parser(
        "plot",
        help="draw a timeline: one lane per member, partitions owned, states, epochs, gaps",
    )
    plot.add_argument("file", type=Path, help="a JSON-lines timeline (Timeline.write_jsonl)")
    plot.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="image to write; the suffix picks the format (default: FILE with .png)",
    )
    plot.add_argument("--title", default=None, help="title of the figure")
    plot.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    from consumer.testing.plotting import plot

    source: Path = args.file
    output: Path = args.output if args.output is not None else source.with_suffix(".png")
    if not source.is_file():
        print(f"kgm timeline plot: no such file: {source}", file=sys.stderr)
        return 2
    try:
        written = plot(source, output, title=args.title or f"Rebalance timeline: {source.name}")
    except (ValueError, ImportError) as exc:
        print(f"kgm timeline plot: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written}")
    return 0
