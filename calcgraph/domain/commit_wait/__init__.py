"""The use cases the doors drive that commit, then wait: submit a job and wait for its result,
wait for a run's job and tick the run, follow a run. Each owns its unit of work and its wait
(`service.py`); the wait bounds are declared once (`waits.py`).

The jobs are written by `domain/jobs/submission` and recorded by the job store
(`domain/jobs/store`), which the actors drive."""
