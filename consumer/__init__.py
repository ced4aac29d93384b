"""kafka-group-member: a KIP-848 consumer-group member for Python."""

__version__ = "0.1.0"
