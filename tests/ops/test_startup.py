"""Start-up pays only for what serving /health needs: heavy modules load on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory

from calcgraph.migrations.runner import alembic_config, script_heads

# Each costs a tenth of a second or more to import, and none is needed to answer /health.
HEAVY = ("alembic", "docker", "requests", "pint", "strawberry", "graphql")


def test_building_the_app_imports_no_heavy_module(tmp_path: Path) -> None:
    env = {
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'app.db'}",
        "CALCGRAPH_SANDBOX": "process",
    }
    assert _loaded("from calcgraph.app import create_app\ncreate_app()", env, HEAVY) == []


# What `calcgraph serve` imports after /health answers (serving.starting), never before: the
# application's doors and services, the identity stack, the broker, the client's HTTP library.
AFTER_HEALTH = (
    "calcgraph.app",
    "calcgraph.auth.authenticate",
    "calcgraph.workers.inprocess",
    "calcgraph.rest_compat.openapi",
    "dramatiq",
    "jwt",
    "cryptography",
    "httpx",
    "rich",
    "yaml",
    *HEAVY,
)


def _loaded(code: str, env: dict[str, str], names: tuple[str, ...]) -> list[str]:
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(n for n in {names!r} if n in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_served_app_answers_health_before_importing_the_application(tmp_path: Path) -> None:
    env = {
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'served.db'}",
        "CALCGRAPH_SANDBOX": "process",
    }
    code = (
        "from calcgraph.auth.issuer import require_https\n"
        "from calcgraph.auth.devidp import DEV_USERS, start_for_serve\n"
        "from calcgraph.serving.server import create_served_app\n"
        "create_served_app()"
    )
    assert _loaded(code, env, AFTER_HEALTH) == []


def test_the_command_line_loads_no_server_stack() -> None:
    code = "from calcgraph.cli import build_parser\nbuild_parser()"
    server = ("sqlalchemy", "dramatiq", "jwt", "calcgraph.app", "uvicorn", *HEAVY)
    assert _loaded(code, {}, server) == []


def test_the_heads_read_from_the_revision_files_are_alembics() -> None:
    heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())
    assert script_heads() == heads


def test_upgrading_a_migrated_database_does_not_import_alembic(database_url: str) -> None:
    code = (
        "import asyncio\n"
        "from calcgraph.db.engine import Database\n"
        "from calcgraph.migrations.runner import upgrade\n"
        "async def main():\n"
        f"    database = Database({database_url!r})\n"
        "    await upgrade(database)\n"
        "    await database.dispose()\n"
        "asyncio.run(main())"
    )
    assert "alembic" not in _loaded(code, {}, HEAVY)


def test_upgrading_a_fresh_database_migrates_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    code = (
        "import asyncio\n"
        "from sqlalchemy import text\n"
        "from calcgraph.db.engine import Database\n"
        "from calcgraph.migrations.runner import upgrade\n"
        "async def main():\n"
        f"    database = Database({url!r})\n"
        "    await upgrade(database)\n"
        "    async with database.read_session() as session:\n"
        "        found = await session.scalars(text('SELECT version_num FROM alembic_version'))\n"
        "        print(list(found))\n"
        "    await database.dispose()\n"
        "asyncio.run(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert sorted(json.loads(done.stdout.strip().replace("'", '"'))) == sorted(script_heads() or ())


def test_a_batch_sent_in_process_imports_no_redis() -> None:
    """An in-process platform's first tick submitting two jobs imported redis only to learn
    that its broker was not Redis's (50 ms of CPU in the demo's run)."""
    code = (
        "from calcgraph.domain.jobs.enqueue import Message\n"
        "from calcgraph.settings import Settings\n"
        "from calcgraph.workers.broker import QUEUE, build_broker, send_many\n"
        "broker = build_broker(Settings(redis_url=None))\n"
        "assert send_many(broker, [Message('a.b'), Message('a.b')]) == 0\n"
        "assert broker.queues[QUEUE].qsize() == 2\n"
    )
    assert _loaded(code, {}, ("redis", "dramatiq.brokers.redis")) == []
