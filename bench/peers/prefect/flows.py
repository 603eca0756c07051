"""The two workflows of calcgraph's workflow benchmarks, written the way a Prefect 3 user would.

- `diamond`: A -> (B, C) -> D, four trivial tasks; B and C are submitted together to the default
  task runner (threads), D waits on both.
- `chain40`: forty tasks in sequence, each adding fibo(10) to what the one before returned
  (Windmill's engine benchmark task).
"""

from prefect import flow, task


@task
def inc(x: float) -> float:
    return x + 1


@task
def add(a: float, b: float) -> float:
    return a + b


def _fibo(n: int) -> int:
    return n if n < 2 else _fibo(n - 1) + _fibo(n - 2)


@task
def fibo(x: float) -> float:
    return x + _fibo(10)


@flow
def diamond(x: float) -> float:
    a = inc(x)
    b = inc.submit(a)
    c = inc.submit(a)
    return add(b, c)  # Prefect waits for both futures before D starts


@flow
def chain40(x: float) -> float:
    for _ in range(40):
        x = fibo(x)
    return x
