"""Routing an HTTP request without trying every route.

Starlette's router tries its routes in order, a regular expression each, until one matches
fully: about 10 % of the API's CPU on an unchanged tick (py-spy), whose route comes late in
a list of more than a hundred. `IndexedRouter` tries only the routes that can match the
request's first path segment (a route whose first segment is literal, and every route whose
first segment is not: parameters, mounts, hosts), in their original order, so the first full
match is the one the plain scan would find. Anything else (no full match: 404, 405, a
redirect to the slash; websockets; lifespan) is left to Starlette's own scan.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send


def _literal_head(route: BaseRoute) -> str | None:
    """The route's literal first path segment, None when it may match any (parameters,
    mounts, hosts, websockets: left to every request)."""
    if type(route) is not Route:
        return None
    head = route.path.lstrip("/").split("/", 1)[0]
    return None if "{" in head else head


def _head(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0]


def _route_path(scope: Scope) -> str:
    """The path Starlette's routes match on (its `get_route_path`): below the root path."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    if path == root:
        return ""
    return path[len(root) :] if path[len(root)] == "/" else path


class IndexedRouter(Router):
    _indexed: tuple[int, dict[str, list[BaseRoute]], list[BaseRoute]] | None = None

    def _index(self) -> tuple[dict[str, list[BaseRoute]], list[BaseRoute]]:
        indexed = self._indexed
        if indexed is None or indexed[0] != len(self.routes):  # a route added since
            heads = {_literal_head(route) for route in self.routes} - {None}
            by_head: dict[str, list[BaseRoute]] = {}
            anywhere: list[BaseRoute] = []
            for route in self.routes:
                head = _literal_head(route)
                if head is None:
                    anywhere.append(route)
                    for name in heads:
                        by_head.setdefault(str(name), []).append(route)
                else:
                    by_head.setdefault(head, []).append(route)
            indexed = self._indexed = (len(self.routes), by_head, anywhere)
        return indexed[1], indexed[2]

    def candidates(self, path: str) -> list[BaseRoute]:
        """The routes that may match `path`, in the router's order."""
        by_head, anywhere = self._index()
        return by_head.get(_head(path), anywhere)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.candidates(_route_path(scope)):
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.setdefault("router", self)
                    scope["route"] = route
                    scope.update(child_scope)
                    await route.handle(scope, receive, send)
                    return
        await super().app(scope, receive, send)
