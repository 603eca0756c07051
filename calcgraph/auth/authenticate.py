"""From an Authorization header to a provisioned Principal, and the middleware that does it
once per request at the edge of the REST and GraphQL doors."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from sqlalchemy.exc import IntegrityError
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from calcgraph.auth.scope import PRINCIPAL_KEY
from calcgraph.auth.verify import TokenVerifier
from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Identity, Principal
from calcgraph.domain.access.service import access_service
from calcgraph.domain.errors import DomainError, Unauthenticated

# Contract section 3: the only routes that need no token. Everything else routed needs one.
PUBLIC_ROUTES = frozenset(
    {
        ("POST", "/types/check-connection"),
        ("GET", "/types"),
        ("POST", "/auth/login"),
        ("POST", "/auth/callback"),
        # The redirect target of the authorization code flow: the browser arrives without a
        # token by design (contract section 1, CALCGRAPH_OIDC_REDIRECT_URI).
        ("GET", "/auth/callback-page"),
        ("GET", "/health"),
        ("GET", "/metrics"),
        # Describes routes, not data, like the GraphiQL page; clients read it before sign-in.
        ("GET", "/openapi.json"),
    }
)
# The GraphiQL page and the public catalog fields live here; every other field asks for the
# principal itself, so a token is optional at this door (but verified when sent).
OPTIONAL_AUTH_PATHS = frozenset({"/graphql"})
_CACHE_SIZE = 10_000
_PRINCIPAL = "principal"


def bearer_token(header: str) -> str:
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("use the header Authorization: Bearer <access token>")
    return token.strip()


class Authenticator:
    """Verifies a bearer token and returns its principal, provisioning the user on first
    sight and updating it when the claims change."""

    def __init__(self, verifier: TokenVerifier, database: Database) -> None:
        self.verifier = verifier
        self.database = database
        # Subject -> (identity, principal): an unchanged identity needs no database write.
        self._known: OrderedDict[str, tuple[Identity, Principal]] = OrderedDict()

    async def authenticate(self, authorization: str) -> Principal:
        verified = await self.verifier.verified(bearer_token(authorization))
        # A token polled several times a second names the same principal each time: derived
        # once, kept with the verifier's memo of the token (and gone with it).
        kept = verified.derived.get(_PRINCIPAL)
        if isinstance(kept, Principal):
            return kept
        claims = verified.claims
        principal = await self.principal_for(Identity.from_claims(claims))
        # The caller holds until its token would be refused: what a socket or a subscription
        # authenticated once checks before each act (contract 8b).
        principal = replace(principal, expires_at=float(claims["exp"]) + self.verifier.leeway)
        verified.derived[_PRINCIPAL] = principal
        return principal

    async def principal_for(self, identity: Identity) -> Principal:
        known = self._known.get(identity.subject)
        if known is not None and known[0] == identity:
            self._known.move_to_end(identity.subject)
            return known[1]
        try:
            principal = await self._provision(identity)
        except IntegrityError:
            # Two first requests of one user raced; the other one created the row.
            principal = await self._provision(identity)
        self._known[identity.subject] = (identity, principal)
        if len(self._known) > _CACHE_SIZE:
            self._known.popitem(last=False)
        return principal

    async def _provision(self, identity: Identity) -> Principal:
        async with self.database.write_session() as session:
            return await access_service.provision(session, identity)


def current_principal(connection: HTTPConnection) -> Principal | None:
    principal = connection.scope.get("state", {}).get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def require_principal(connection: HTTPConnection) -> Principal:
    principal = current_principal(connection)
    if principal is None:
        raise Unauthenticated("this route needs a bearer token: Authorization: Bearer <token>")
    return principal


class AuthenticationMiddleware:
    """Authenticates once per request. A routed path outside the public list without a valid
    token is refused here (Unauthenticated, rendered 401 by the REST door's error middleware,
    which sits outside this one); unrouted paths fall through to the router's 404 and 405."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        routes: Sequence[BaseRoute],
        throttle: Callable[[Scope], Awaitable[DomainError | None]] | None = None,
        also_public: Callable[[str, str], bool] = lambda method, path: False,
    ) -> None:
        self.app = app
        # Paths public beyond the routes' list, by (method, path): the web app's files.
        self.also_public = also_public
        self.authenticator = authenticator
        self.routes = list(routes)
        # Asked before answering a refused token: a 429 instead when the address is over its
        # rate (the rate limiter after this middleware never sees refused requests).
        self.throttle = throttle

    def _routed(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] == Match.FULL for route in self.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = "GET" if scope["method"] == "HEAD" else scope["method"]
        path = scope["path"]
        public = (method, path) in PUBLIC_ROUTES or self.also_public(method, path)
        header = Headers(scope=scope).get("authorization")
        principal: Principal | None = None
        try:
            if header is not None and not public:
                principal = await self.authenticator.authenticate(header)
            elif not public and path not in OPTIONAL_AUTH_PATHS and self._routed(scope):
                raise Unauthenticated(
                    "this route needs a bearer token: Authorization: Bearer <access token>"
                )
        except DomainError as exc:
            # Raised, not rendered: the door's error middleware outside this one maps it.
            if header is not None and self.throttle is not None:
                raise (await self.throttle(scope) or exc) from None
            raise
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)
