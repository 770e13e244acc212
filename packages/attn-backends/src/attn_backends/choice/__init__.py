"""Which backend a configured name builds, and why one cannot serve: the effective names, the
host, batch-invariance and KV-dtype refusals, the registry, the stamp, and the pair a runner gets."""
