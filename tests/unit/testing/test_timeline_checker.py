"""The timeline recorder and invariant checker, on crafted runs.

``clean_run()`` is a run with a handover, a SIGKILL and the duplicates that a kill allows; it
passes. Each ``test_detects_*`` changes it so that exactly one invariant breaks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.testing.invariants import check
from consumer.testing.timeline import Timeline
from consumer.testing.timeline_events import (
    COMMIT_REGRESSION,
    DOUBLE_OWNERSHIP,
    FENCE,
    KILL,
    LOST_RECORD,
    NOT_STABLE,
    UNEXPLAINED_DUPLICATE,
    Commit,
    Event,
    Fault,
    Ownership,
    Processed,
    Produced,
    StateChange,
)

STABLE_WITHIN_MS = 7000


def clean_run(*, b_takes_p0_at: int = 11_000, b_restarts_p0_at: int = 10) -> Timeline:
    """a owns p0+p1, hands p1 to b, is SIGKILLed at 5000 with p0 offsets 10..14 uncommitted;
    b takes p0 over from the committed offset and processes to the end."""
    t = Timeline(clock_ms=lambda: 0)
    t.produced("t", 0, range(20))
    t.produced("t", 1, range(10))
    t.state("a", "JOINING", 0)
    t.state("a", "STABLE", 50)
    t.assigned("a", "t", 0, 40)
    t.assigned("a", "t", 1, 40)
    for offset in range(10):
        t.processed("a", "t", 0, offset, 100 + offset)
    t.commit("a", "t", 0, 10, 200)
    for offset in range(5):
        t.processed("a", "t", 1, offset, 300 + offset)
    t.commit("a", "t", 1, 5, 900)
    t.state("b", "JOINING", 1000)
    t.revoked("a", "t", 1, 1000)
    t.assigned("b", "t", 1, 1010)
    t.state("b", "STABLE", 1020)
    for offset in range(5, 10):
        t.processed("b", "t", 1, offset, 1100 + offset)
    t.commit("b", "t", 1, 10, 1200)
    for offset in range(10, 15):
        t.processed("a", "t", 0, offset, 4000 + offset)
    t.fault(KILL, "a", 5000, 5000)
    t.state("b", "RECONCILE_ASSIGNMENT", b_takes_p0_at)
    t.assigned("b", "t", 0, b_takes_p0_at)
    t.state("b", "STABLE", b_takes_p0_at + 10)
    for offset in range(b_restarts_p0_at, 20):
        t.processed("b", "t", 0, offset, b_takes_p0_at + 100 + offset)
    t.commit("b", "t", 0, 20, b_takes_p0_at + 500)
    return t


def test_clean_run_passes_with_the_duplicates_a_kill_allows() -> None:
    report = check(clean_run(), stable_within_ms=STABLE_WITHIN_MS)
    assert report.ok, report.summary()
    assert report.records_produced == 30
    assert report.records_processed == 35
    assert report.duplicates == 5
    assert report.excused_duplicates == 5  # exactly a's uncommitted window, offsets 10..14
    assert (report.double_owned, report.commit_regressions, report.lost_records) == (0, 0, 0)
    assert report.members_not_stable == 0
    report.raise_for_violations()


def _only(report_timeline: Timeline | list[Event], invariant: str, **kwargs: int) -> str:
    report = check(report_timeline, stable_within_ms=STABLE_WITHIN_MS, **kwargs)
    assert report.invariants_broken() == {invariant}, report.summary()
    with pytest.raises(AssertionError, match=invariant):
        report.raise_for_violations()
    return report.summary()


def test_detects_double_ownership_before_the_owner_died() -> None:
    t = clean_run()
    t.record(Ownership("c", "t", 0, 4500, 4900))  # a still owns p0 until its kill at 5000
    summary = _only(t, DOUBLE_OWNERSHIP)
    assert "t[0] owned by a [40, 5000) (cut by kill at 5000) and by c [4500, 4900)" in summary
    assert "both live for 400 ms" in summary


def test_ownership_may_start_when_the_previous_owner_is_killed() -> None:
    report = check(clean_run(b_takes_p0_at=5000), stable_within_ms=STABLE_WITHIN_MS)
    assert report.ok, report.summary()


def test_detects_commit_regression() -> None:
    t = clean_run()
    t.commit("b", "t", 1, 7, 1300)
    summary = _only(t, COMMIT_REGRESSION)
    assert "t[1] commit went back from 10 (b at 1200) to 7 (b at 1300)" in summary


def test_detects_lost_records() -> None:
    t = clean_run()
    t.produced("t", 1, [10, 11, 12, 15])
    summary = _only(t, LOST_RECORD)
    assert "t[1]: 4 produced record(s) never processed, offsets 10..12, 15" in summary
    assert check(t).lost_records == 4


def test_detects_duplicate_after_a_graceful_handover() -> None:
    t = clean_run()
    t.processed("b", "t", 1, 4, 1150)  # a gave p1 back cleanly; offset 4 was committed
    summary = _only(t, UNEXPLAINED_DUPLICATE)
    assert "t[1] offset 4 processed by a at 304 and again by b at 1150" in summary
    assert "a did not die (kill or fence) in between" in summary


def test_detects_duplicates_beyond_the_uncommitted_window() -> None:
    report = check(clean_run(b_restarts_p0_at=8), stable_within_ms=STABLE_WITHIN_MS)
    assert report.invariants_broken() == {UNEXPLAINED_DUPLICATE}, report.summary()
    assert report.duplicates == 7
    assert report.excused_duplicates == 5
    assert len(report.violations) == 2  # offsets 8 and 9 were committed by a before its kill
    assert "a had committed 10 before its kill at 5000" in report.violations[0].message


def test_detects_member_not_stable_in_time_after_the_last_fault() -> None:
    t = clean_run()
    t.state("b", "JOINING", 11_100)
    t.state("b", "STABLE", 12_500)  # deadline: fault end 5000 + 7000 = 12000
    summary = _only(t, NOT_STABLE)
    assert "b was JOINING at 12000, 7000 ms after the last fault ended at 5000" in summary
    assert "it became STABLE only at 12500" in summary


def test_member_that_never_recovers_is_reported() -> None:
    t = clean_run()
    t.state("b", "FATAL", 11_100)
    assert "it never did" in _only(t, NOT_STABLE)


def test_stability_is_not_checked_without_a_bound_or_without_faults() -> None:
    t = clean_run()
    t.state("b", "JOINING", 11_100)
    assert check(t).ok
    events = [e for e in clean_run().events() if not isinstance(e, Fault)]
    events.append(StateChange("b", "JOINING", 20_000))
    assert NOT_STABLE not in check(events, stable_within_ms=1).invariants_broken()


def test_members_that_left_are_not_required_to_be_stable() -> None:
    t = clean_run()
    t.state("b", "UNSUBSCRIBING", 11_200)
    t.state("b", "UNSUBSCRIBED", 11_300)
    assert check(t, stable_within_ms=STABLE_WITHIN_MS).ok


def test_fenced_state_ends_ownership_and_allows_duplicates() -> None:
    events: list[Event] = [
        Produced("t", 0, 0),
        Ownership("a", "t", 0, 0, None),  # a never noticed; the broker fenced it
        Processed("a", "t", 0, 0, 10),
        StateChange("a", "FENCED", 100),
        Ownership("b", "t", 0, 100, None),
        Processed("b", "t", 0, 0, 200),
    ]
    report = check(events)
    assert report.ok, report.summary()
    assert report.excused_duplicates == 1


def test_fence_fault_lets_the_same_member_rejoin_and_reprocess() -> None:
    events: list[Event] = [
        Ownership("a", "t", 0, 0, 150),
        Processed("a", "t", 0, 0, 10),
        Fault(FENCE, "a", 100, 100),
        Ownership("a", "t", 0, 200, None),  # rejoined with a new epoch
        Processed("a", "t", 0, 0, 300),
    ]
    assert check(events).ok


def test_long_isolation_counts_as_death_only_with_a_session_timeout() -> None:
    events: list[Event] = [
        Ownership("a", "t", 0, 0, None),  # blackholed zombie: still thinks it owns t[0]
        Fault("blackhole", "a", 1000, 20_000),
        Ownership("b", "t", 0, 7500, None),
    ]
    assert check(events, session_timeout_ms=6000).ok
    assert check(events).invariants_broken() == {DOUBLE_OWNERSHIP}
    short = [*events[:1], Fault("blackhole", "a", 1000, 3000), events[2]]
    assert check(short, session_timeout_ms=6000).invariants_broken() == {DOUBLE_OWNERSHIP}


def test_overlap_tolerance_and_same_member_overlaps() -> None:
    events: list[Event] = [
        Ownership("a", "t", 0, 0, 1005),
        Ownership("b", "t", 0, 1000, None),
        Ownership("b", "t", 0, 1500, 1600),  # b overlapping itself is not double ownership
    ]
    assert check(events).double_owned == 1
    assert check(events, overlap_tolerance_ms=5).ok


def test_commits_at_the_same_time_keep_recording_order() -> None:
    ok = [Commit("a", "t", 0, 5, 100), Commit("a", "t", 0, 6, 100)]
    assert check(ok).ok
    bad = [Commit("a", "t", 0, 6, 100), Commit("a", "t", 0, 5, 100)]
    assert check(bad).commit_regressions == 1


# ----------------------------------------------------------------------------------------------
# Property: sequential owners that hand over at the committed offset never violate anything;
# letting any one of them start before its predecessor stopped is always caught.


@given(st.lists(st.integers(min_value=1, max_value=20), min_size=2, max_size=6), st.data())
def test_sequential_handovers_pass_and_any_early_start_is_caught(
    batches: list[int], data: st.DataObject
) -> None:
    events: list[Event] = []
    offset, now = 0, 0
    starts: list[int] = []
    for index, size in enumerate(batches):
        member = f"m{index}"
        starts.append(now)
        for i in range(size):
            events.append(Produced("t", 0, offset + i))
            events.append(Processed(member, "t", 0, offset + i, now + i))
        offset += size
        events.append(Commit(member, "t", 0, offset, now + size))
        events.append(Ownership(member, "t", 0, now, now + size + 1))
        now += size + 1
    assert check(events).ok
    late = data.draw(st.integers(min_value=1, max_value=len(batches) - 1))
    early = [
        Ownership(e.member, e.topic, e.partition, e.owned_from_ms - 1, e.owned_to_ms)
        if isinstance(e, Ownership) and e.member == f"m{late}"
        else e
        for e in events
    ]
    report = check(early)
    assert report.invariants_broken() == {DOUBLE_OWNERSHIP}
    assert report.double_owned == 1


# ----------------------------------------------------------------------------------------------
# Recording from threads and processes


def test_threads_record_concurrently() -> None:
    t = Timeline()
    barrier = threading.Barrier(8)

    def work(n: int) -> None:
        barrier.wait()
        for offset in range(500):
            t.processed(f"m{n}", "t", n, offset)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    events = t.events()
    assert len(events) == 4000
    assert {(e.member, e.offset) for e in events if isinstance(e, Processed)} == {
        (f"m{n}", o) for n in range(8) for o in range(500)
    }


def test_jsonl_round_trip_keeps_every_event(tmp_path: Path) -> None:
    original = clean_run()
    original.assigned("c", "t", 5, 30_000)  # still open at the end
    path = tmp_path / "run.jsonl"
    original.write_jsonl(path)
    copy = Timeline()
    assert copy.merge_jsonl(path) == len(original.events())
    assert sorted(map(repr, copy.events())) == sorted(map(repr, original.events()))
    assert check(copy, stable_within_ms=STABLE_WITHIN_MS).ok


def test_streamed_lines_merge_into_intervals_and_a_torn_last_line_is_ignored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "member.jsonl"
    member = Timeline(clock_ms=lambda: 7)
    member.stream_to(path)
    member.assigned("a", "t", 0, 10)
    member.processed("a", "t", 0, 0)
    member.revoked("a", "t", 0, 20)
    member.assigned("a", "t", 1, 30)
    member.close()
    with path.open("a") as torn:
        torn.write('{"type":"processed","member":"a","top')
    merged = Timeline()
    assert merged.merge_jsonl(path) == 4
    assert sorted(map(repr, merged.events())) == sorted(
        map(
            repr,
            [
                Ownership("a", "t", 0, 10, 20),
                Processed("a", "t", 0, 0, 7),
                Ownership("a", "t", 1, 30, None),
            ],
        )
    )


def test_a_malformed_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"type": "state", "member": "a", "state": "STABLE", "at_ms": 1})
    path.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a timeline event"):
        Timeline().merge_jsonl(path)
    path.write_text('{"type": "nonsense", "at_ms": 1}\n')
    with pytest.raises(ValueError, match=r":1: not a timeline event"):
        Timeline().merge_jsonl(path)


def test_events_of_a_sigkilled_member_process_are_recovered(tmp_path: Path) -> None:
    path = tmp_path / "victim.jsonl"
    child = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from consumer.testing.timeline import Timeline
        t = Timeline()
        t.stream_to(Path({str(path)!r}))
        t.assigned("victim", "t", 0)
        offset = 0
        while True:
            t.processed("victim", "t", 0, offset)
            offset += 1
            if offset == 100:
                print("ready", flush=True)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"  # 100 events are on disk
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
    merged = Timeline()
    merged.merge_jsonl(path)
    events = merged.events()
    [owned] = [e for e in events if isinstance(e, Ownership)]
    assert owned.owned_to_ms is None  # assigned, never revoked: open until its death
    offsets = [e.offset for e in events if isinstance(e, Processed)]
    assert offsets == list(range(len(offsets)))
    assert len(offsets) >= 100


def test_recording_errors_are_explicit() -> None:
    t = Timeline(clock_ms=lambda: 1)
    t.assigned("a", "t", 0)
    with pytest.raises(ValueError, match="already owns"):
        t.assigned("a", "t", 0)
    with pytest.raises(ValueError, match="does not own"):
        t.revoked("b", "t", 0)
