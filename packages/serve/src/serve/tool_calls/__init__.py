"""Tool calls in the model's text: one module per family of call syntax (hermes, llama3), the
reader they share (json_calls), forced calls (forced), and which family a request reads (families)."""
