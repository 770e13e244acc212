"""What the model's text is read into, incrementally as it streams (the same reading gives the
whole answer): the events of a turn (reasoning, content, a call opened, its arguments), the
held-back text that may still be a marker, and the reasoning splitter. Tool calls are read in
`serve.tool_calls`, over these events; `serve.assistant_turn` composes the two into one turn."""
