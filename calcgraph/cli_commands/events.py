"""`calcgraph events tail` and `calcgraph webhooks create|list|deliveries|test|delete`
(contract section 9)."""

from __future__ import annotations

import argparse
import json
import sys

from calcgraph.cli_commands.common import (
    OK,
    Context,
    add_command_on,
    command,
    command_group,
    global_options,
)
from calcgraph.cli_commands.listing import add_listing


def _tail(context: Context, args: argparse.Namespace) -> int:
    """Follow events as they are recorded (one line each; `--json`: one JSON object a line)
    until interrupted, or until `--count` events were printed."""
    printed = 0
    try:
        for event in context.client.events(
            args.type or (),
            args.subject,
            "now" if args.after is None else args.after,
            run=args.run,
        ):
            if context.as_json:
                sys.stdout.write(json.dumps(event.model_dump(mode="json")) + "\n")
            else:
                summary = json.dumps(event.data, separators=(",", ":"))[:160]
                context.console.print(
                    f"{event.time}  {event.type}  {event.subject}  {summary}",
                    markup=False,
                    highlight=False,
                )
            sys.stdout.flush()
            printed += 1
            if args.count is not None and printed >= args.count:
                return OK
    except KeyboardInterrupt:
        return OK
    return OK


def _create(context: Context, args: argparse.Namespace) -> int:
    hook = context.client.create_webhook(args.endpoint, args.type, args.description)
    context.emit(
        hook,
        lambda: context.console.print(
            f"webhook {hook.id} -> {hook.url}\nsecret (shown once): {hook.secret}",
            markup=False,
        ),
    )
    return OK


def _deliveries(context: Context, args: argparse.Namespace) -> int:
    page = context.client.webhook_deliveries(args.webhook_id, args.limit, args.cursor)
    context.emit_table(
        page,
        ("event", "type", "attempt", "state", "status", "error", "at"),
        (
            (d.event_id, d.type, d.attempt, d.state, d.status_code, d.error, d.attempted_at)
            for d in page.items
        ),
    )
    return OK


def _test(context: Context, args: argparse.Namespace) -> int:
    event_id = context.client.test_webhook(args.webhook_id)
    context.emit({"event_id": event_id}, lambda: context.console.print(f"test event {event_id}"))
    return OK


def _delete(context: Context, args: argparse.Namespace) -> int:
    context.client.delete_webhook(args.webhook_id)
    context.emit({"deleted": args.webhook_id}, lambda: context.console.print("deleted"))
    return OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = [global_options()]
    events = command_group(sub, "events", "follow what happens (contract section 9)")
    tail = events.add_parser("tail", parents=common, help="print events as they are recorded")
    tail.add_argument(
        "--type", action="append", help="an event type or a prefix ending in *; repeatable"
    )
    tail.add_argument("--subject", default=None, help="only events about this id")
    tail.add_argument("--run", default=None, help="only this workflow run's events and its jobs'")
    tail.add_argument(
        "--after", default=None, help="a cursor to start after (default: now; 0: oldest kept)"
    )
    tail.add_argument("--count", type=int, default=None, help="stop after N events")
    tail.set_defaults(func=command(_tail))

    hooks = command_group(sub, "webhooks", "send events to your HTTP endpoints")
    create = hooks.add_parser("create", parents=common, help="create a webhook")
    create.add_argument("endpoint", metavar="URL", help="http or https endpoint")
    create.add_argument(
        "--type", action="append", required=True, help="event type or prefix*; repeatable"
    )
    create.add_argument("--description", default="")
    create.set_defaults(func=command(_create))
    add_listing(
        hooks,
        "your webhooks",
        lambda context, args: context.client.list_webhooks(args.limit, args.cursor),
        ("webhook", "url", "types", "enabled"),
        lambda w: (w.id, w.url, ",".join(w.types), w.enabled),
    )
    deliveries = hooks.add_parser(
        "deliveries", parents=common, help="a webhook's delivery attempts, newest first"
    )
    deliveries.add_argument("--limit", type=int, default=None, help="items per page (max 500)")
    deliveries.add_argument("--cursor", default=None, help="next_cursor of the previous page")
    deliveries.set_defaults(func=command(_deliveries))
    deliveries.add_argument("webhook_id", metavar="ID")
    add_command_on(hooks, "test", "send a calcgraph.webhook.test event", "webhook_id", _test)
    add_command_on(hooks, "delete", "delete a webhook", "webhook_id", _delete)
