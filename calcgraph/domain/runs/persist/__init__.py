"""A tick's result written in its unit of work."""
