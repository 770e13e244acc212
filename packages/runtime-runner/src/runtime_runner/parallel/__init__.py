"""Tensor parallelism: which rows and columns of a decoder one rank holds (`rank_layout`), that
rank's slices of the loaded weights (`rank_weights`), and the projections that run the group's
collectives (`tensor_parallel`).
"""
