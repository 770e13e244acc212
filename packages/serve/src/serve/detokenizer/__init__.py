"""The detokenizer process: token ids to incremental text, stop strings, logprob token texts."""
