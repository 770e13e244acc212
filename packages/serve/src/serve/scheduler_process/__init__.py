"""The scheduler process: owns the scheduler and the runner, wired together, and their serving loop."""
