"""The run listing within one answer's bound (contract 8b)."""
