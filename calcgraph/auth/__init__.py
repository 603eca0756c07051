"""Identity: OIDC discovery, the JWKS cache, bearer token verification, the development
identity provider. Adapters only; who may do what is decided in `domain/access/policy.py`."""
