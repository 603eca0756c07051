"""The one typed settings object. No other module reads the environment."""

from __future__ import annotations

import shutil
from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SandboxKind = Literal["docker", "bwrap", "process"]
DbDriver = Literal["sqlite+aiosqlite", "postgresql+asyncpg"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CALCGRAPH_", extra="ignore")

    database_url: str = "sqlite+aiosqlite:///./calcgraph.db"
    redis_url: SecretStr | None = None
    sandbox: SandboxKind | None = Field(
        default=None, description="unset: bwrap when the program is on PATH, else process"
    )

    oidc_issuer: str | None = None
    oidc_audience: str = "calcgraph-api"
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_redirect_uri: str | None = None

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 2 * 1024 * 1024
    graphql_ide: bool = True
    graphql_introspection: bool = True
    sqlite_busy_timeout_ms: int = 5000
    log_level: str = "info"

    @field_validator("database_url")
    @classmethod
    def _known_driver(cls, url: str) -> str:
        driver = url.split(":", 1)[0]
        if driver not in ("sqlite+aiosqlite", "postgresql+asyncpg"):
            raise ValueError(
                f"CALCGRAPH_DATABASE_URL must start with sqlite+aiosqlite:// or "
                f"postgresql+asyncpg://, not {driver}://"
            )
        return url

    @property
    def db_driver(self) -> DbDriver:
        if self.database_url.startswith("sqlite+aiosqlite"):
            return "sqlite+aiosqlite"
        return "postgresql+asyncpg"

    @property
    def sandbox_kind(self) -> SandboxKind:
        if self.sandbox is not None:
            return self.sandbox
        return "bwrap" if shutil.which("bwrap") else "process"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
