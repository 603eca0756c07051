"""Chain execution: a worker runs a chain of the frozen plan node after node."""
