"""attn_backends."""
