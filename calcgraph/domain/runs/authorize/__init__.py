"""The run owner's rights applied to a tick's result."""
