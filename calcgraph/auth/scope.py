"""Where the authenticated principal rides in a request's ASGI scope.

Its own module: the outermost middleware (request ids, access log) and the rate limiter read
it, and importing `authenticate` for a string would load the identity stack (JWT, the HTTP
client, the access service) before a starting server can answer /health.
"""

from __future__ import annotations

PRINCIPAL_KEY = "principal"
