"""What the model's text becomes in an assistant turn: reasoning, content and tool calls, read
incrementally as the text streams (the same reading gives the whole answer)."""
