"""Bodies and answers of the login routes."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from calcgraph.rest_compat.wire import Body, Out, Timestamp


class LoginStartOut(Out):
    authorization_url: str
    code_verifier: str
    state: str
    redirect_uri: str


class UserOut(Out):
    id: str
    sub: str = Field(validation_alias="subject")
    username: str
    email: str | None
    given_name: str | None
    family_name: str | None
    roles: list[str]
    created_at: Timestamp


class LoginResultOut(Out):
    access_token: str
    token_type: str
    expires_in: int | None
    refresh_token: str | None
    id_token: str | None
    user: UserOut


class LoginCallbackBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"code": "4f1c2a", "code_verifier": "v" * 43, "state": "b3e1"}]
        }
    )

    code: str = Field(min_length=1, max_length=4096, description="authorization code")
    code_verifier: str = Field(
        min_length=43, max_length=128, description="the PKCE verifier POST /auth/login gave"
    )
    state: str | None = Field(default=None, description="echoed state; checked by the client")
