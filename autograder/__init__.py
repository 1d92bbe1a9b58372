"""The grading side of *Attention, derived*: the check registry, the sandbox and the CLI."""
