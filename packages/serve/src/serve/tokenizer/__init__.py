"""The tokenizer manager: tokenizes requests in the main process and routes results to HTTP handlers."""
