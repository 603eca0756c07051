"""`calcgraph login`: a token for the CLI and the Python client, kept in the credentials file.

The server runs the sign-in (`POST /auth/login` gives the authorization URL and the PKCE
verifier, `POST /auth/callback` exchanges the code), so the CLI needs no client of its own
at the identity provider:

- `--username alice` signs in at the development identity provider without a browser: its
  sign-in form takes a user name, and its redirect carries the code;
- otherwise the authorization URL opens in a browser, and the code shown on the server's
  callback page is pasted back here (the server's redirect URI is its own page, so a
  loopback listener of the CLI would never receive the code);
- `--token TOKEN` stores a token obtained elsewhere, after checking it with `GET /auth/me`.
"""

from __future__ import annotations

import argparse
import time
import webbrowser
from urllib.parse import parse_qs, urlsplit

import httpx

from calcgraph.cli_commands.common import OK, USAGE, Context, command, global_options
from calcgraph.client import models as m


def dev_authorize(start: m.LoginStart, username: str) -> str:
    """The code the development provider issues for `username` (its form asks no password)."""
    try:
        response = httpx.post(
            start.authorization_url, data={"sub": username}, follow_redirects=False, timeout=10
        )
    except httpx.HTTPError as exc:
        raise ValueError(f"the identity provider does not answer: {exc}") from None
    query = parse_qs(urlsplit(response.headers.get("location", "")).query)
    if response.status_code not in (302, 303) or "code" not in query:
        raise ValueError(
            "the identity provider is not the development one (it did not sign in "
            f"{username!r} from a form); run `calcgraph login` without --username"
        )
    if query.get("state") != [start.state]:
        raise ValueError("the identity provider answered with another sign-in's state")
    code: str = query["code"][0]
    return code


def browser_authorize(context: Context, start: m.LoginStart, open_browser: bool) -> str:
    context.errors.print("Sign in at:", highlight=False)
    context.errors.print(start.authorization_url, markup=False, highlight=False, soft_wrap=True)
    if open_browser:
        webbrowser.open(start.authorization_url)
    code = input("Paste the code shown after sign-in: ").strip()
    if not code:
        raise ValueError("no code given")
    return code


def _login(context: Context, args: argparse.Namespace) -> int:
    client = context.client
    credentials = context.settings.credentials
    given = getattr(args, "token", None)
    if given:
        if args.username:
            raise ValueError("give --username or --token, not both")
        client.token = given
        user = client.me()
        credentials.store(client.url, given, username=user.username)
        result_user: m.User | None = user
        expires_in: int | None = None
    else:
        client.token = None  # a stale stored token must not get in the way of signing in
        start = client.login_start()
        if args.username:
            code = dev_authorize(start, args.username)
        else:
            code = browser_authorize(context, start, not args.no_browser)
        result = client.login_complete(code, start.code_verifier)
        result_user, expires_in = result.user, result.expires_in
        details: dict[str, object] = {}
        if result.user is not None:
            details["username"] = result.user.username
        if expires_in:
            details["expires_at"] = int(time.time()) + expires_in
        credentials.store(client.url, result.access_token, **details)
    username = result_user.username if result_user is not None else None
    document = {
        "url": client.url,
        "username": username,
        "credentials_file": str(credentials.path),
        "expires_in": expires_in,
    }
    context.emit(
        document,
        lambda: context.console.print(
            f"signed in to {client.url} as [bold]{username or 'unknown'}[/]; "
            f"token saved in {credentials.path}",
            highlight=False,
        ),
    )
    return OK


def _logout(context: Context, args: argparse.Namespace) -> int:
    client = context.client
    forgotten = context.settings.credentials.forget(client.url)
    context.emit(
        {"url": client.url, "forgotten": forgotten},
        lambda: context.console.print(
            f"forgot the token of {client.url}" if forgotten else f"no token for {client.url}",
            highlight=False,
        ),
    )
    return OK if forgotten else USAGE


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    login = sub.add_parser(
        "login",
        parents=[global_options()],
        help="sign in and keep the token in ~/.config/calcgraph/credentials.json",
    )
    # `--token TOKEN` (a global option) stores that token, once `GET /auth/me` accepts it.
    login.add_argument(
        "--username", help="development identity provider: sign in as this user, no browser"
    )
    login.add_argument(
        "--no-browser", action="store_true", help="print the sign-in URL, do not open it"
    )
    login.set_defaults(func=command(_login))
    logout = sub.add_parser(
        "logout", parents=[global_options()], help="forget the stored token of the server"
    )
    logout.set_defaults(func=command(_logout))
