"""The background runtime: one asyncio loop per member that does the member's network I/O.

The application side (:mod:`consumer._client`) imports this package and nothing inside it:
it builds a :class:`BackgroundRuntime` (the one constructor call), keeps it as a
:class:`~consumer._bridge.handle.RuntimeHandle`, and talks to it through :mod:`consumer._bridge`
(queues, messages, the last-poll cell). Everything else here is internal to the runtime.
"""

from consumer._runtime.background import BackgroundRuntime

__all__ = ["BackgroundRuntime"]
