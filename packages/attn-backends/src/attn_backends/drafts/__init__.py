"""A speculative draft runner's attention: its extend half, one decode backend per draft step,
the backend that holds both, and the factory that builds them through the registry."""
