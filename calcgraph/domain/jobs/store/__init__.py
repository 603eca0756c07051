"""Executing functions as jobs: the execute use case (doors) and the job store (actors).

Kept beside the read paths of `domain/jobs` rather than inside them: the read service and
repository serve GET /jobs; this package submits, claims, records and sweeps jobs.
"""
