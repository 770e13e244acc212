"""spec_workers."""
