"""Tool calls in the model's text: one module per family of call syntax (hermes, llama3), the
reader they share (json_calls), forced calls (forced), which family a request reads (families),
and the server's own format for models without one (generic_format)."""
