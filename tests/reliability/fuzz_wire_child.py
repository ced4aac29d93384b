"""Runs the frame-decoding fuzzers of ``test_fuzz_decoder`` in a child process.

``python fuzz_wire_child.py MODE START PROGRESS`` fuzzes every response type from index
``START`` on (``MODE``: ``mutated`` or ``random``), writing ``INDEX HEX`` of the input about to
be decoded to ``PROGRESS`` first. A crash of the whole process (the native decoder aborting)
therefore leaves the type and the input behind; an exception that is not one of our typed
errors makes hypothesis fail and the process exit with status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_decoder import (
    FUZZ,
    RESPONSE_TYPES,
    decode_and_parse,
    encode_response_frame,
    mutated,
)


def fuzzer(mode: str, index: int, attempt: Callable[[int, bytes], None]) -> Callable[[], None]:
    """The hypothesis test of ``mode`` for response type ``index``."""
    response_type = RESPONSE_TYPES[index][1]
    if mode == "mutated":

        @FUZZ
        @given(data=st.data())
        def run_mutated(data: st.DataObject) -> None:
            frame = encode_response_frame(data.draw(st.from_type(response_type)), correlation_id=7)
            attempt(index, frame[4:])
            attempt(index, data.draw(mutated(frame[4:])))

        return run_mutated

    @FUZZ
    @given(frame=st.binary(max_size=300))
    def run_random(frame: bytes) -> None:
        attempt(index, frame)

    return run_random


def main(mode: str, start: int, progress_path: str) -> int:
    progress = Path(progress_path).open("w", encoding="ascii")  # noqa: SIM115 - whole run

    def attempt(index: int, frame: bytes) -> None:
        progress.seek(0)
        progress.write(f"{index} {frame.hex()}\n")
        progress.truncate()
        progress.flush()
        key, response_type = RESPONSE_TYPES[index]
        decode_and_parse(key, response_type, frame)

    for index in range(start, len(RESPONSE_TYPES)):
        fuzzer(mode, index, attempt)()
    progress.seek(0)
    progress.write("done\n")
    progress.truncate()
    progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
