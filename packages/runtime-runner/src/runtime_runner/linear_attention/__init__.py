"""A hybrid model's linear-attention layers as the runner holds them: the pool of recurrent state
slots, the per-forward plan of which slot each request's layers read and write, and the seam that
hands both to attn-backends' linear-attention backend."""
