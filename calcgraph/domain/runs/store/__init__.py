"""The run repository with the process's memo behind it, read through."""
