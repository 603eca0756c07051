"""What the sync and async clients share: connection settings, request building, reading
answers and errors. Only sending (and sleeping) differs between them."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from calcgraph import __version__
from calcgraph.client.errors import CalcgraphError, ConnectionError, error_from_response
from calcgraph.client.operations import Call
from calcgraph.client.settings import ClientSettings, resolve

R = TypeVar("R")
DEFAULT_TIMEOUT = 30.0


class ClientBase:
    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        settings: ClientSettings | None = None,
    ) -> None:
        connection = resolve(url, token, settings)
        self.url = connection.url
        self.token = connection.token
        self.timeout = timeout

    def __repr__(self) -> str:
        signed = "with a token" if self.token else "without a token"
        return f"<{type(self).__name__} {self.url} {signed}>"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"calcgraph-client/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        """Keyword arguments of `httpx.(Async)Client.request` for one call."""
        request: dict[str, Any] = {
            "method": call.method,
            "url": call.path,
            "params": list(call.params),
            "headers": self._headers(),
            # A long-poll is held by the server on purpose: it must not time out meanwhile.
            "timeout": httpx.Timeout(self.timeout + call.holds, connect=min(self.timeout, 10.0)),
        }
        if call.json is not None:
            request["json"] = call.json
        return request

    def _read(self, call: Call[R], response: httpx.Response) -> R:
        if response.is_error:
            raise error_from_response(response)
        try:
            body = response.json() if response.content else None
        except ValueError:
            raise CalcgraphError(
                f"the server answered {call.method} {call.path} with something other than JSON",
                status=response.status_code,
            ) from None
        return call.parse(body)

    def _unreachable(self, exc: httpx.TransportError) -> ConnectionError:
        reason = str(exc) or type(exc).__name__
        return ConnectionError(f"ConnectionError: cannot reach calcgraph at {self.url}: {reason}")
