"""The share member's generated documentation page, as data for :mod:`consumer.member.diagram`.

``python -m consumer.member.diagram --write`` (or ``--page share``) renders it into
``docs/concepts/share-member-state-machine.md``.
"""

from __future__ import annotations

from consumer.member.diagram import DOCS_DIR, DiagramPage
from consumer.share.rules import SHARE_PHASES, SHARE_ROUND_STEPS, SHARE_RULES
from consumer.share.states import SHARE_STATES, ShareState

#: The share member's page.
SHARE_PAGE = DiagramPage(
    key="share-member-state-diagram",
    doc_path=DOCS_DIR / "share-member-state-machine.md",
    states=SHARE_STATES,
    rules=SHARE_RULES,
    initial=ShareState.UNSUBSCRIBED,
    terminal=ShareState.FATAL,
    round_steps=SHARE_ROUND_STEPS,
    phase_rows=tuple(
        (phase.name, info.sends, info.waits_for, info.skipped_when or "never", "-")
        for phase, info in SHARE_PHASES.items()
    ),
)
