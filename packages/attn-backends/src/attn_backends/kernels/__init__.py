"""The attention kernels themselves, below every backend: the C++ paged kernel (cpu_paged's), the
torch decode path with its plan and workspace, the native-call ABI, and the Triton kernels."""
