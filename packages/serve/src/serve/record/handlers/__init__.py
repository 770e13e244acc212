"""The resolution handlers, one module per concern; `serve.record.pipeline` orders them."""
