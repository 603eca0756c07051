"""Where the client finds its server and token when the caller names neither.

The server's `calcgraph.settings` describes the server; a client (the CLI, a notebook) runs
elsewhere and needs only these. They are read here, at one place, in this order: arguments,
then `CALCGRAPH_URL` / `CALCGRAPH_TOKEN`, then the credentials file `calcgraph login` writes
(`CALCGRAPH_CREDENTIALS_FILE`, default `~/.config/calcgraph/credentials.json`), then the
default URL `http://127.0.0.1:8000` with no token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from calcgraph.client.credentials import Credentials

DEFAULT_URL = "http://127.0.0.1:8000"


class ClientSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CALCGRAPH_", extra="ignore")

    url: str | None = Field(default=None, description="base URL of the calcgraph API")
    token: str | None = Field(default=None, description="bearer access token")
    credentials_file: Path = Field(
        default=Path("~/.config/calcgraph/credentials.json"),
        description="where `calcgraph login` keeps tokens (mode 0600)",
    )

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.credentials_file.expanduser())


@dataclass(frozen=True)
class Connection:
    url: str
    token: str | None


def resolve(
    url: str | None = None, token: str | None = None, settings: ClientSettings | None = None
) -> Connection:
    """The server and token to use, from arguments, environment and credentials file."""
    settings = settings or ClientSettings()
    stored = settings.credentials
    chosen = (url or settings.url or stored.default_url() or DEFAULT_URL).rstrip("/")
    return Connection(chosen, token or settings.token or stored.token_for(chosen))
