"""Internal helpers of ``consumer.config``: the key table, value checks, value types."""
