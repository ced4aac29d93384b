"""An asyncio API over :class:`consumer.Consumer`: ``await consumer.poll()``, ``async for``.

:class:`AsyncConsumer` drives the same KIP-848 member as ``Consumer`` from an asyncio event loop,
without a thread per call: the member's background thread wakes the loop when it queues an event
for the application, and records are taken from librdkafka without blocking. Rebalance callbacks
(plain functions or ``async def``) run on the event loop. See ``docs/howto/asyncio.md``.
"""

from consumer.aio._consumer import AsyncConsumer

__all__ = ["AsyncConsumer"]
