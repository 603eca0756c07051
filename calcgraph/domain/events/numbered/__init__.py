"""A unit of work's events written with their positions in one statement."""
