"""The OpenAI-compatible HTTP API (FastAPI), its protocol models, errors and SSE streaming."""
