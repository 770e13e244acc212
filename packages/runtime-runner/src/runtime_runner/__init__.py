"""runtime_runner."""
