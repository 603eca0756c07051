"""The job store as the actors change it: claim, record, renew, release.

Beside it under `domain/jobs`: the read service and repository (GET /jobs),
`domain/jobs/submission` (the jobs the doors and ticks submit) and `domain/jobs/sweep` (the
sweeper's round over the same rows).
"""
