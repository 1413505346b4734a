"""``flask hash-password`` and ``flask new-token``: the values ``DASHBOARD_USERS`` and
``API_TOKENS`` take, made without the secret ever landing in shell history or a log."""

from __future__ import annotations

import sys

import click
from flask import Flask

from ..roles import Role
from .credentials import NAME_PATTERN
from .principals import hash_password, new_token, token_digest

ROLE_CHOICE = click.Choice([role.value for role in Role])


def _name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse now a name the configuration would refuse at start-up."""
    if value is not None and not NAME_PATTERN.fullmatch(value):
        raise click.BadParameter("use letters, digits and _ . @ + - (up to 64 characters)")
    return value


@click.command("hash-password")
@click.option(
    "--user", "name", callback=_name, help="Print a whole DASHBOARD_USERS entry for this user name."
)
@click.option("--role", type=ROLE_CHOICE, default=Role.VIEWER.value, show_default=True)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the password from standard input.")
def hash_password_command(name: str | None, role: str, from_stdin: bool) -> None:
    """Print a password hash for DASHBOARD_USERS (the password is prompted for, not echoed)."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if len(password) < 8:
        raise click.UsageError("Use a password of at least 8 characters.")
    hashed = hash_password(password)
    click.echo(f"{name}:{role}:{hashed}" if name else hashed)


@click.command("new-token")
@click.option(
    "--name", default="script", show_default=True, callback=_name, help="The token's name in the audit trail."
)
@click.option("--role", type=ROLE_CHOICE, default=Role.VIEWER.value, show_default=True)
def new_token_command(name: str, role: str) -> None:
    """Print a new API token, and the API_TOKENS entry that stores only its digest."""
    token = new_token()
    click.echo(f"token (give it to the script, shown once): {token}")
    click.echo(f"API_TOKENS entry: {name}:{role}:sha256:{token_digest(token).hex()}")


def init_app(app: Flask) -> None:
    app.cli.add_command(hash_password_command)
    app.cli.add_command(new_token_command)
