"""runtime_scheduler."""
