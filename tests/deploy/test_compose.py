"""deploy/compose.yaml: the production services, wired with real settings only.

Parsed as YAML and checked against calcgraph's own Settings; validated by `docker compose
config` (or docker-compose v1) when one is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from calcgraph.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
REALM = DEPLOY / "keycloak" / "calcgraph-realm.json"
SOCKET = "/var/run/docker.sock"
CALCGRAPH_SERVICES = ("migrate", "api", "worker")
# What the operator puts in deploy/.env (env.example lists the same names).
OPERATOR_ENV = {
    "POSTGRES_PASSWORD": "pg-secret",
    "KEYCLOAK_DB_PASSWORD": "kc-db-secret",
    "KEYCLOAK_ADMIN_PASSWORD": "kc-admin-secret",
    "CALCGRAPH_OIDC_CLIENT_SECRET": "client-secret",
    "KEYCLOAK_URL": "https://id.example.org",
    "CALCGRAPH_PUBLIC_URL": "https://calcgraph.example.org",
}
_INTERPOLATION = re.compile(r"\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}")


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}, as `docker compose` reads them."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        if name in env:
            return env[name]
        if kind == "-":
            return rest
        raise KeyError(f"{name} is required: {rest}")

    return _INTERPOLATION.sub(one, value)


def environment(service: str) -> dict[str, str]:
    env = services()[service].get("environment", {})
    assert isinstance(env, dict), f"{service}: write environment as a mapping"
    return {k: interpolate(str(v), OPERATOR_ENV) for k, v in env.items()}


def volumes(service: str) -> list[tuple[str, str]]:
    out = []
    for entry in services()[service].get("volumes", []):
        source, target, *_ = entry.split(":")
        out.append((source, target))
    return out


def test_services() -> None:
    assert {"postgres", "redis", "keycloak", "migrate", "api", "worker"} <= set(services())


@pytest.mark.parametrize("service", CALCGRAPH_SERVICES)
def test_every_calcgraph_variable_is_a_real_setting(service: str) -> None:
    known = {f"CALCGRAPH_{name.upper()}" for name in Settings.model_fields}
    env = environment(service)
    used = {name for name in env if name.startswith("CALCGRAPH_")}
    assert used, service
    assert used - known == set()


@pytest.mark.parametrize("service", CALCGRAPH_SERVICES)
def test_settings_load_from_the_service_environment(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(Settings.model_fields):
        monkeypatch.delenv(f"CALCGRAPH_{name.upper()}", raising=False)
    for name, value in environment(service).items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.db_driver == "postgresql+asyncpg"
    assert settings.redis_url is not None
    assert settings.sandbox_kind == "docker"
    assert settings.issuer == "https://id.example.org/realms/calcgraph"
    assert not settings.uses_dev_identity_provider
    assert settings.git_allowed_schemes == ["https"]


def test_api_serves_on_all_interfaces_and_holds_no_state() -> None:
    api = services()["api"]
    assert api["command"][:3] == ["serve", "--host", "0.0.0.0"]
    env = environment("api")
    assert env["CALCGRAPH_OIDC_CLIENT_ID"] == "calcgraph-api"
    assert env["CALCGRAPH_OIDC_REDIRECT_URI"].startswith("https://")
    shared = set(volumes("worker"))
    for source, target in volumes("api"):
        # The engine's socket (image builds) or a volume every worker mounts too: nothing that
        # lives only with one API replica.
        assert (source, target) == (SOCKET, SOCKET) or (
            (source, target) in shared and not source.startswith(("/", "."))
        ), (source, target)


def test_workers_scale_and_reach_the_engine() -> None:
    worker = services()["worker"]
    assert worker["command"][0] == "worker"
    assert worker["deploy"]["replicas"] >= 2
    assert (SOCKET, SOCKET) in volumes("worker")
    # A fixed host port or container name would block --scale.
    assert "ports" not in worker
    assert "container_name" not in worker
    # Sandbox code is bind-mounted by the host's engine: staged at the same path on both sides.
    stage = environment("worker")["TMPDIR"]
    assert (stage, stage) in volumes("worker")


def test_migrations_run_once_before_api_and_workers() -> None:
    assert services()["migrate"]["command"] == ["migrate"]
    for name in ("api", "worker"):
        depends = services()[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
    assert services()["api"]["depends_on"]["keycloak"]["condition"] == "service_healthy"


def test_healthchecks_back_every_health_condition() -> None:
    for name, service in services().items():
        for dependency, rule in service.get("depends_on", {}).items():
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in services()[dependency], (name, dependency)
    for name in ("postgres", "redis", "keycloak", "api", "worker"):
        assert services()[name]["healthcheck"]["test"], name


def test_keycloak_imports_the_realm_and_gets_its_placeholders() -> None:
    keycloak = services()["keycloak"]
    assert "--import-realm" in keycloak["command"]
    mounts = volumes("keycloak")
    source, target = next(m for m in mounts if m[1].startswith("/opt/keycloak/data/import/"))
    assert (DEPLOY / source).resolve() == REALM.resolve()
    assert REALM.is_file()
    env = environment("keycloak")
    required = {
        m.group(1) for m in _INTERPOLATION.finditer(REALM.read_text()) if m.group(2) is None
    }
    assert required, "the realm export has placeholders without a default"
    assert required <= set(env)
    api = environment("api")
    assert env["CALCGRAPH_OIDC_CLIENT_SECRET"] == api["CALCGRAPH_OIDC_CLIENT_SECRET"]
    assert api["CALCGRAPH_OIDC_ISSUER"] == f"{env['KC_HOSTNAME']}/realms/calcgraph"
    assert json.loads(REALM.read_text())["realm"] == "calcgraph"


def test_images_build_from_files_that_exist() -> None:
    for name, service in services().items():
        build = service.get("build")
        if build is not None:
            assert (DEPLOY / build["context"] / build["dockerfile"]).is_file(), name
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert 'ENTRYPOINT ["calcgraph"]' in dockerfile
    assert re.search(r"^USER (?!root)", dockerfile, re.M)
    for name in OPERATOR_ENV:
        assert f"{name}=" in (DEPLOY / "env.example").read_text()


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy is not None else None


def test_docker_compose_config_validates() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor docker-compose is installed")
    run = [*command, "--project-directory", str(DEPLOY), "-f", str(COMPOSE), "config", "-q"]
    base = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": "/tmp"}
    ok = subprocess.run(run, env=base | OPERATOR_ENV, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    missing = {k: v for k, v in OPERATOR_ENV.items() if k != "POSTGRES_PASSWORD"}
    refused = subprocess.run(run, env=base | missing, capture_output=True, text=True, check=False)
    assert refused.returncode != 0
    assert "POSTGRES_PASSWORD" in refused.stderr
