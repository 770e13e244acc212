"""Prometheus metrics of the server, collected in the main process."""
