"""The two workflows of calcgraph's workflow benchmarks, written the way a Dagster user would.

- `diamond`: A -> (B, C) -> D, four trivial ops; D takes both B's and C's outputs.
- `chain40`: forty ops in sequence, each adding fibo(10) to what the one before returned.

Both run with `execute_in_process`: every op in the calling process, one after another, with an
ephemeral instance (run and event storage in memory). No process or sandbox boundary between
ops, nor between the ops and the caller.
"""

from dagster import In, Out, graph, op


@op(ins={"x": In(float)}, out=Out(float))
def inc(x: float) -> float:
    return x + 1


@op(ins={"a": In(float), "b": In(float)}, out=Out(float))
def add(a: float, b: float) -> float:
    return a + b


def _fibo(n: int) -> int:
    return n if n < 2 else _fibo(n - 1) + _fibo(n - 2)


@op(ins={"x": In(float)}, out=Out(float))
def fibo(x: float) -> float:
    return x + _fibo(10)


@graph
def diamond_graph(x: float) -> float:
    a = inc.alias("A")(x)
    b = inc.alias("B")(a)
    c = inc.alias("C")(a)
    return add.alias("D")(b, c)


@graph
def chain40_graph(x: float) -> float:
    for i in range(40):
        x = fibo.alias(f"n{i}")(x)
    return x


diamond = diamond_graph.to_job(name="diamond")
chain40 = chain40_graph.to_job(name="chain40")
