"""Helpers the end-to-end tests and the serving benchmark share: a tiny checkpoint built offline,
and the real server started as a subprocess."""
