"""The workspace's test kit (tests and tools only, never imported by the product): the real server
as a subprocess, tiny checkpoints and GGUF files built offline, and what the tool and agent tests
share."""
