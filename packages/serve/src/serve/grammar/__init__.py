"""The grammar engine behind output constraints (xgrammar), built in the scheduler process."""
