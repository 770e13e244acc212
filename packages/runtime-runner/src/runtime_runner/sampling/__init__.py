"""Sampling the next token of each request (`sampler`), and every position of a target_verify
forward as the decode step that would have drawn it (`verify`).
"""
