"""census."""
