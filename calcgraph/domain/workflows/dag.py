"""Graph algorithms over node keys, iterative so a 1,000-node workflow cannot hit recursion limits.

`deps` maps every node to the nodes it reads from (its upstream). Both functions are
O(nodes + edges) apart from the heap, and deterministic: ties are broken by node key.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping


def consumers_of(deps: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """The reverse adjacency: node to the sorted nodes that read from it."""
    out: dict[str, list[str]] = {key: [] for key in deps}
    for key, ups in deps.items():
        for up in set(ups):
            if up in out:
                out[up].append(key)
    for downs in out.values():
        downs.sort()
    return out


def topological_order(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """Kahn's algorithm, smallest ready key first. Nodes on or behind a cycle are left out."""
    consumers = consumers_of(deps)
    waiting = {key: len({u for u in ups if u in deps}) for key, ups in deps.items()}
    ready = [key for key, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        key = heapq.heappop(ready)
        order.append(key)
        for down in consumers[key]:
            waiting[down] -= 1
            if waiting[down] == 0:
                heapq.heappush(ready, down)
    return order


def _components(deps: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, with an explicit stack)."""
    succ = {key: sorted({u for u in ups if u in deps}) for key, ups in deps.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(deps):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(succ[node]):
                work.append((node, child + 1))
                nxt = succ[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                found.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def cycles(deps: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One closed path per cycle-bearing component, e.g. ["a", "b", "a"], sorted by start key.

    A component may hold many elementary cycles; naming one per component is enough for an
    author to find it, and stays linear where enumerating them all would not.
    """
    result: list[list[str]] = []
    for component in _components(deps):
        members = set(component)
        start = min(component)
        if len(component) == 1 and start not in set(deps[start]):
            continue
        # Shortest path back to `start` through the component, following read direction.
        parent: dict[str, str] = {}
        queue = deque([start])
        closing: str | None = None
        while queue and closing is None:
            node = queue.popleft()
            for up in sorted(set(deps[node])):
                if up == start:
                    closing = node
                    break
                if up in members and up not in parent:
                    parent[up] = node
                    queue.append(up)
        assert closing is not None
        path = [closing]
        while path[-1] != start:
            path.append(parent[path[-1]])
        result.append([start, *path])
    return sorted(result)
