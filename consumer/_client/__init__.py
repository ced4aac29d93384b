"""Ring 3: what applications touch (the Consumer facade and its librdkafka data plane)."""
