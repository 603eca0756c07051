"""The one typed settings object. No other module reads the environment; how a field's text is
read and checked is in `fields.py`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from calcgraph.db import defaults as pool
from calcgraph.domain.builds import limits
from calcgraph.domain.builds.validation import SubmissionLimits
from calcgraph.domain.events.schedule import DEFAULT_RETRY_SCHEDULE
from calcgraph.domain.quotas.limits import Quotas
from calcgraph.settings.fields import (
    NICENESS_DEFAULT,
    DatabaseUrl,
    HostList,
    LocalRoots,
    Niceness,
    RetrySchedule,
)

SandboxKind = Literal["docker", "bwrap", "process"]
DbDriver = Literal["sqlite+aiosqlite", "postgresql+asyncpg"]
ScannerKind = Literal["auto", "trivy", "osv"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CALCGRAPH_", extra="ignore")

    database_url: DatabaseUrl = "sqlite+aiosqlite:///./calcgraph.db"
    redis_url: SecretStr | None = None
    sandbox: SandboxKind = Field(
        default="bwrap",
        description="bwrap (default), docker, or process (a single trusted user only, when "
        "named); a backend that cannot enforce the worker limits here refuses to start",
    )
    sandbox_timeout_seconds: float = Field(
        default=300.0, gt=0, description="function execution timeout; the sandbox is killed after"
    )
    sandbox_pids: int = Field(default=256, gt=0, description="process count limit per sandbox")
    sandbox_niceness: Niceness = Field(
        default=NICENESS_DEFAULT,
        description="niceness steps (0-19) below the serve or worker process that starts a "
        "sandbox, cgroup weight and docker cpu_shares to match; 0: the platform's priority",
    )
    warm_pool_size: int = Field(default=200, ge=0, description="warm sandboxes kept, LRU evicted")
    warm_idle_seconds: float = Field(
        default=600.0, gt=0, description="a warm sandbox idle this long without a job is stopped"
    )

    # Execution: broker, workers, result cache, sweeper (issue 5).
    execute_max_wait_seconds: float = Field(
        default=300.0, ge=0, description="cap of the execute `wait` query parameter"
    )
    result_cache_ttl_seconds: float = Field(
        default=3600.0, ge=0, description="the specification's result cache lifetime"
    )
    inprocess_worker_threads: int = Field(
        default=4, gt=0, description="worker threads of the in-process broker inside `serve`"
    )
    worker_poll_ms: int = Field(
        default=5,
        gt=0,
        description="poll of a Redis consumer holding retries until their eta, or whose "
        "doorbell subscription is broken (an idle consumer sleeps until a message is sent)",
    )
    job_max_retries: int = Field(
        default=3, ge=0, description="retries of a job after infrastructure failures"
    )
    sweeper_interval_seconds: float = Field(default=5.0, gt=0)
    sweeper_stale_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a queued job this old whose message the broker lost is re-sent",
    )
    sweeper_max_deliveries: int = Field(default=5, gt=0)
    job_heartbeat_seconds: float = Field(
        default=5.0, gt=0, description="how often a worker renews the heartbeat of its jobs"
    )
    job_heartbeat_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a running job whose heartbeat is this old goes to another worker",
    )
    job_cancel_check_seconds: float = Field(
        default=1.0,
        gt=0,
        le=5,
        description="how often a worker asks whether a job it runs was cancelled (then kills "
        "its sandbox); at most 5, so a cancel stops a job within 10 s",
    )
    chain_execution: Literal["chain", "node"] = Field(
        default="chain",
        description="chain: a chain of the frozen plan runs as one worker job, node by node in "
        "one warm sandbox; node: one worker job per node, each submitted by a tick",
    )
    code_cache_dir: Path | None = Field(
        default=None, description="staged function code by content; unset: under the temp dir"
    )
    redis_key_prefix: str = Field(
        default="", description="prefix of calcgraph's Redis keys and of its Dramatiq namespace"
    )
    docker_host: str = "unix:///var/run/docker.sock"
    sandbox_base_image: str = "calcgraph/python-base"
    sandbox_registry: str | None = Field(
        default=None, description="registry host images are pulled from (unset: as referenced)"
    )
    sandbox_fallback_registry: str | None = None
    sandbox_pull_timeout_seconds: float = Field(default=30.0, gt=0, description="per registry")

    oidc_issuer: str | None = None
    oidc_audience: str = "calcgraph-api"
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_redirect_uri: str | None = None
    oidc_scopes: str = "openid profile email"
    oidc_leeway_seconds: float = 30.0
    oidc_jwks_refetch_seconds: float = Field(
        default=5.0, description="at most one JWKS refetch per interval on an unknown kid"
    )
    dev_idp_port: int = Field(
        default=8400, description="loopback port of the development identity provider"
    )
    graphql_max_depth: int = 12
    graphql_max_aliases: int = 30
    graphql_max_tokens: int = 5000
    graphql_max_selections: int = Field(
        default=5000, gt=0, description="field selections of a document, fragments expanded"
    )
    graphql_max_cost: int = Field(
        default=1_000_000,
        gt=0,
        description="estimated cost of a document: fields, list fields times their limit or 20",
    )

    # Contract 8b, what one user may spend (docs/configuration.md#limits).
    limit_socket_init_seconds: float = Field(
        default=5.0, gt=0, description="a WebSocket without connection_init by then closes 4408"
    )
    limit_sockets_per_user: int = Field(
        default=20, gt=0, description="open GraphQL WebSockets per user, per serve process"
    )
    limit_pending_sockets_per_address: int = Field(
        default=50,
        gt=0,
        description="WebSockets not yet authenticated per client address, per serve process",
    )
    limit_requests_in_flight_per_user: int = Field(
        default=100,
        ge=0,
        description="HTTP requests of one user in flight at once, per serve process; 0: no limit",
    )
    limit_server_seconds_per_minute: float = Field(
        default=6.0,
        ge=0,
        description="seconds of a serve process's time one user's requests may use per minute "
        "(a quarter of it at once); 0: no limit",
    )
    limit_runs_per_user: int = Field(
        default=Quotas.runs, gt=0, description="workflow runs of one user not yet terminal"
    )
    limit_nodes_per_workflow: int = Field(
        default=Quotas.nodes, gt=0, description="nodes of one workflow version"
    )
    limit_queued_jobs_per_user: int = Field(
        default=Quotas.queued_jobs,
        gt=0,
        description="jobs of one user submitted and not yet started",
    )
    limit_stored_bytes_per_user: int = Field(
        default=Quotas.stored_bytes, gt=0, description="inputs, outputs and logs of one user's jobs"
    )

    cors_origins: str | None = Field(
        default=None,
        description="comma-separated origins allowed to call the API from a browser; "
        "unset: no cross-origin access",
    )

    host: str = "127.0.0.1"
    port: int = 8000
    http_keep_alive_seconds: int = Field(
        default=75,
        gt=0,
        description="how long `serve` keeps an idle HTTP connection open; longer than clients' "
        "own idle limit (httpx: 5 s), so that the client closes first",
    )
    max_body_bytes: int = 2 * 1024 * 1024
    graphql_ide: bool = True
    graphql_introspection: bool = True
    sqlite_busy_timeout_ms: int = pool.SQLITE_BUSY_TIMEOUT_MS
    # A process's database work runs on one event loop: a few units of work in flight keep the
    # loop and a local PostgreSQL busy, and more only interleave, stretching every request (500
    # polled runs on 2 cores: tick p99 56-106 ms with 4, 50-341 ms with 8, 570-830 ms with 30).
    database_pool_size: int = Field(
        default=pool.POOL_SIZE,
        gt=0,
        description="PostgreSQL connections each process opens as it needs them and keeps open "
        "(API and worker processes each have their own pool); the units of work in flight",
    )
    database_max_overflow: int = Field(
        default=pool.MAX_OVERFLOW,
        ge=0,
        description="connections a process may open beyond the pool's size, each closed when "
        "returned (a new backend, its login and its prepared statements every time)",
    )
    database_pool_timeout_seconds: float = Field(
        default=pool.POOL_TIMEOUT_S,
        gt=0,
        description="wait for a free pooled connection before answering 503 Unavailable",
    )
    database_queue_limit: int = Field(
        default=pool.QUEUE_LIMIT,
        ge=0,
        description="API process: units of work that may wait for a pooled PostgreSQL "
        "connection; one more answers 503 Unavailable with Retry-After at once, rather than "
        "waiting behind the others (the workers' units always wait)",
    )
    log_level: str = "info"
    log_format: Literal["json", "text"] | None = Field(
        default=None, description="unset: json when stderr is not a terminal, else text"
    )
    # Per caller (user, else client address): a token bucket refilled at this rate, holding
    # `rate_limit_burst` tokens; 0 disables. Shared through Redis when it is configured.
    # Generous defaults: scripts and notebooks driving runs must not meet them; operators tune.
    rate_limit_per_minute: float = Field(default=6000.0, ge=0)
    rate_limit_burst: int = Field(default=1000, gt=0)
    worker_metrics_port: int | None = Field(
        default=None,
        description="`calcgraph worker`: serve /metrics on this port (process i: port + i)",
    )

    # POST /packages/from-git: limits of one clone, passed to calcgraph.sources.git.
    git_clone_timeout_seconds: float = Field(default=120.0, gt=0)
    git_max_repository_bytes: int = Field(default=200 * 1024 * 1024, gt=0)
    git_allowed_schemes: list[Literal["https"]] = ["https"]
    # Folders of the server from which `file://` URLs and local paths may be deployed
    # (comma-separated in CALCGRAPH_GIT_LOCAL_ROOTS); unset: none, the server's disk is not a
    # package source for its users.
    git_local_roots: LocalRoots = Field(
        default=[], description="comma-separated folders local git deploys may read"
    )

    # Builds from submitted code (POST /functions); the specification's limits by default.
    code_size_limit_bytes: int = Field(default=limits.CODE_SIZE_LIMIT_BYTES, gt=0)
    dependency_limit: int = Field(default=limits.DEPENDENCY_LIMIT, gt=0)
    scanner: ScannerKind = Field(
        default="auto", description="auto: trivy when the program is on PATH, else osv"
    )
    advisory_db_path: Path | None = Field(
        default=None,
        description="OSV advisories for the built-in scanner: a directory of *.json "
        "(searched recursively) or an OSV all.zip; unset: no advisories, with a warning",
    )
    trivy_skip_db_update: bool = False
    scan_timeout_seconds: float = Field(default=300.0, gt=0)
    # Image and artifact builds (issue 6). The build runs pip on this host, so its index
    # options are the operator's; nothing else of the environment reaches the build.
    build_timeout_seconds: float = Field(default=300.0, gt=0, description="spec: image build")
    build_dir: Path = Field(
        default=Path("./calcgraph-builds"),
        description="artifacts (content-addressed) and build logs; shared by API and workers",
    )
    build_index_url: str | None = Field(default=None, description="pip --index-url")
    build_find_links: list[str] = Field(default=[], description="pip --find-links locations")
    build_no_index: bool = Field(default=False, description="pip --no-index (local wheels only)")
    function_image_repository: str = Field(
        default="calcgraph/fn", description="docker builds are tagged <this>/<function>:<digest>"
    )
    retention_function_days: int = Field(
        default=limits.FUNCTION_MAX_AGE_DAYS, gt=0, description="after the last pull"
    )
    retention_function_versions: int = Field(
        default=limits.FUNCTION_MAX_VERSIONS, gt=0, description="kept per function"
    )
    retention_base_days: int = Field(default=limits.BASE_MAX_AGE_DAYS, gt=0)
    retention_interval_seconds: float = Field(default=86400.0, gt=0)
    # Events (contract section 9).
    event_retention_days: float = Field(
        default=7.0, gt=0, description="events older than this are deleted (every hour)"
    )
    event_prune_interval_seconds: float = Field(
        default=3600.0, gt=0, description="how often a worker process deletes old events"
    )
    event_recheck_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="how often a server process re-reads the event log while readers wait, "
        "in case a wake-up was lost (what a lost one costs a waiting long-poll)",
    )
    webhook_retry_schedule: RetrySchedule = Field(
        default=list(DEFAULT_RETRY_SCHEDULE),
        description="seconds to wait before each retry of a failed delivery (comma-separated); "
        "spent: the delivery is failed",
    )
    webhook_allowed_hosts: HostList = Field(
        default=[],
        description="webhook destinations allowed although private or loopback: host names, "
        "addresses or CIDR blocks (comma-separated)",
    )
    webhook_dispatch_interval_seconds: float = Field(
        default=0.5,
        gt=0,
        description="how often a worker process fans out events and sends due deliveries",
    )
    webhook_delivery_concurrency: int = Field(
        default=64,
        gt=0,
        le=1000,
        description="webhook attempts a worker process has in flight at once",
    )
    webhook_delivery_per_webhook: int = Field(
        default=4,
        gt=0,
        le=100,
        description="of which at most this many to one webhook: a receiver that hangs holds "
        "only these",
    )
    webhook_delivery_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        le=86400,
        description="how long a worker holds an attempt it sends; a killed worker's attempts "
        "are sent again once it runs out",
    )

    @property
    def db_driver(self) -> DbDriver:
        if self.database_url.startswith("sqlite+aiosqlite"):
            return "sqlite+aiosqlite"
        return "postgresql+asyncpg"

    @property
    def quotas(self) -> Quotas:
        return Quotas(
            runs=self.limit_runs_per_user,
            nodes=self.limit_nodes_per_workflow,
            queued_jobs=self.limit_queued_jobs_per_user,
            stored_bytes=self.limit_stored_bytes_per_user,
        )

    @property
    def submission_limits(self) -> SubmissionLimits:
        return SubmissionLimits(self.code_size_limit_bytes, self.dependency_limit)

    @property
    def cors_origin_list(self) -> list[str]:
        if self.cors_origins is None:
            return []
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]

    @property
    def sandbox_kind(self) -> SandboxKind:
        # Never a weaker backend than the one configured: a missing bwrap refuses to start.
        return self.sandbox

    @property
    def uses_dev_identity_provider(self) -> bool:
        return self.oidc_issuer is None

    @property
    def issuer(self) -> str:
        """The configured issuer, else the development identity provider on loopback."""
        if self.oidc_issuer is not None:
            return self.oidc_issuer.rstrip("/")
        return f"http://127.0.0.1:{self.dev_idp_port}"

    @property
    def login_client_id(self) -> str | None:
        # The development provider accepts any client; production names its own.
        if self.oidc_client_id is None and self.uses_dev_identity_provider:
            return "calcgraph-dev"
        return self.oidc_client_id

    @property
    def login_client_secret(self) -> str | None:
        # The development provider refuses a code exchange without a secret (any one will do).
        if self.oidc_client_secret is not None:
            return self.oidc_client_secret.get_secret_value()
        return "development" if self.uses_dev_identity_provider else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
