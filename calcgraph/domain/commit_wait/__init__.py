"""The execution use cases the doors drive: submit a job and wait for its result, wait for a
run's job and tick the run, follow a run. Each owns its unit of work and its wait
(`service.py`); the wait bounds are declared once (`waits.py`).

Not to be confused with `domain/jobs/store`, the job store's transactions (submit, claim,
finish, sweep) that these use cases and the actors call."""
