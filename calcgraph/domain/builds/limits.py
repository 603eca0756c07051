"""The specification's numbers for builds, declared once: the pure rules take them as defaults
and `Settings` as the defaults an operator may change (spec: Limits)."""

# "Code of 1 MB or more" is refused. The contract writes the body limit as "2 MiB" and this one as
# "1 MB", so the unit is the decimal megabyte: 1,000,000 bytes of UTF-8.
CODE_SIZE_LIMIT_BYTES = 1_000_000
# "50 or more dependencies" is refused.
DEPENDENCY_LIMIT = 50
# Registry retention: user function builds go this many days after their last pull, and beyond
# this many newest per function; base images go this many days after they were made.
FUNCTION_MAX_AGE_DAYS = 90
FUNCTION_MAX_VERSIONS = 10
BASE_MAX_AGE_DAYS = 365
