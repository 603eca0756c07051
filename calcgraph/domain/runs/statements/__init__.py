"""The statements of the tick, built once."""
