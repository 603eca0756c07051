"""The Python client's events iterator and webhook methods, `verify_webhook`, the CLI's
`events tail` and `webhooks ...`, and the receiver of docs/events.md, against a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from calcgraph.cli import main
from calcgraph.client import Client, InvalidSignature, verify_webhook
from tests.client.conftest import Served, free_port
from tests.events.receiver import receiver
from tests.packages.publishing import small_body

pytestmark = pytest.mark.db
DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def _publish(client: Client) -> str:
    body = small_body(f"cli-{uuid.uuid4().hex[:8]}", "1.0.0")
    report = client.publish_package(body["manifest"], body["files"])
    return str(report.package_id)


def test_client_webhooks_and_signatures(served_hooks: Served) -> None:
    with Client(served_hooks.url, served_hooks.token("alice")) as cg, receiver() as got:
        hook = cg.create_webhook(got.url, ["calcgraph.webhook.test"], "client test")
        assert hook.secret is not None
        assert hook.secret.startswith("whsec_")
        assert hook.id in [w.id for w in cg.list_webhooks().items]
        assert cg.get_webhook(hook.id).secret is None
        event_id = cg.test_webhook(hook.id)
        arrived = got.wait_for(1)
        assert arrived
        event = verify_webhook(hook.secret, arrived[0].headers, arrived[0].body)
        assert event["id"] == event_id
        assert event["type"] == "calcgraph.webhook.test"
        with pytest.raises(InvalidSignature):
            verify_webhook(hook.secret, arrived[0].headers, arrived[0].body + b" ")
        other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"
        with pytest.raises(InvalidSignature):
            verify_webhook(other, arrived[0].headers, arrived[0].body)
        assert cg.update_webhook(hook.id, enabled=False).enabled is False
        # Listed once its outcome is recorded (just after the receiver answered).
        listed: list[str] = []
        for _ in range(300):
            listed = [d.event_id for d in cg.webhook_deliveries(hook.id).items]
            if listed:
                break
            time.sleep(0.1)
        assert listed[-1] == event_id
        assert cg.webhook_deliveries(hook.id).items[-1].state == "delivered"
        cg.delete_webhook(hook.id)


def test_client_events_iterator_follows_the_long_poll(served_hooks: Served) -> None:
    with Client(served_hooks.url, served_hooks.token("alice")) as cg:
        stream = cg.events(["calcgraph.file.uploaded"], wait=20)
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(next(stream).subject))
        reader.start()
        package_id = ""
        while reader.is_alive() and not package_id:
            threading.Event().wait(0.3)  # the iterator's first long-poll is under way
            package_id = _publish(cg)
        reader.join(timeout=60)
    assert found == [package_id]


def test_cli_tail_and_webhooks(served_hooks: Served, capsys: pytest.CaptureFixture[str]) -> None:
    token = served_hooks.token("alice")
    base = ["--url", served_hooks.url, "--token", token]
    codes: list[int] = []
    tail = threading.Thread(
        target=lambda: codes.append(
            main([*base, "events", "tail", "--type", "calcgraph.file.*", "--count", "1", "--json"])
        )
    )
    tail.start()
    with Client(served_hooks.url, token) as cg:
        while tail.is_alive():
            threading.Event().wait(0.3)
            _publish(cg)
            tail.join(timeout=5)
    assert codes == [0]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert json.loads(lines[0])["type"] == "calcgraph.file.uploaded"
    assert json.loads(lines[0])["subject"]

    with receiver() as got:
        create = ["webhooks", "create", got.url, "--type", "calcgraph.run.*", "--json"]
        assert main([*base, *create]) == 0
        hook = json.loads(capsys.readouterr().out)
        assert hook["secret"].startswith("whsec_")
        assert main([*base, "webhooks", "list", "--json"]) == 0
        assert hook["id"] in [w["id"] for w in json.loads(capsys.readouterr().out)["items"]]
        assert main([*base, "webhooks", "test", hook["id"]]) == 0
        assert "test event" in capsys.readouterr().out
        assert got.wait_for(1)
        # The attempt is recorded once the receiver has answered, a moment after it got the
        # request (the listing holds attempts made): asked again until it shows, up to 20 s.
        deadline = time.monotonic() + 20
        deliveries: list[dict[str, object]] = []
        while not deliveries and time.monotonic() < deadline:
            assert main([*base, "webhooks", "deliveries", hook["id"], "--json"]) == 0
            deliveries = json.loads(capsys.readouterr().out)["items"]
            if not deliveries:
                time.sleep(0.2)
        assert deliveries, "the delivery was never listed"
        assert deliveries[0]["type"] == "calcgraph.webhook.test"
        assert main([*base, "webhooks", "delete", hook["id"]]) == 0
        assert main([*base, "webhooks", "test", hook["id"]]) != 0


def _receiver_block() -> str:
    text = DOC.read_text()
    found = re.search(r"```python receiver\n(.*?)```", text, re.S)
    assert found, "docs/events.md has no receiver block"
    code = found.group(1)
    assert len(code.strip().splitlines()) <= 32
    return code


def test_the_documented_receiver_runs(served_hooks: Served, tmp_path: Path) -> None:
    script = tmp_path / "receiver.py"
    script.write_text(_receiver_block())
    port = free_port()
    with Client(served_hooks.url, served_hooks.token("alice")) as cg:
        hook = cg.create_webhook(f"http://127.0.0.1:{port}/", ["calcgraph.webhook.test"])
        assert hook.secret is not None
        env = {**os.environ, "CALCGRAPH_WEBHOOK_SECRET": hook.secret, "PORT": str(port)}
        process = subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            threading.Event().wait(1.0)  # the receiver listens
            event_id = cg.test_webhook(hook.id)
            assert process.stdout is not None
            line = process.stdout.readline()
        finally:
            process.kill()
            process.communicate()
        cg.delete_webhook(hook.id)
    assert line.startswith("calcgraph.webhook.test ")
    assert hook.id in line
    assert event_id
