"""The thread boundary between the application thread (``consumer._client``) and the background
loop (``consumer._runtime``): everything the two threads exchange is defined here.

* :mod:`~consumer._bridge.queues`: the two event queues (application -> background and back);
* :mod:`~consumer._bridge.messages`: what travels on them besides the member's own inputs and
  commands (stop, state changes, a dead loop, a ``committed()`` request with its reply future);
* :mod:`~consumer._bridge.last_poll`: the application's last ``poll()`` time, read by the loop;
* :mod:`~consumer._bridge.settings`: how the loop reaches the cluster;
* :mod:`~consumer._bridge.handle`: what the application may ask of a running loop.

This package imports neither side: only the member core (for its input and command types) and
the standard library.
"""
