"""The linear-attention layers' kernels (Gated DeltaNet's gated delta rule and causal conv, in
torch, C++ and Triton), their varlen layout, the resolver of a runner's choice, and the backend
that reads it off the stamped runner."""
