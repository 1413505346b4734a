"""``flask --app wsgi prune [--dry-run] [--older-than 7d]``: retention on demand."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from ..config import ConfigError, parse_days, settings_of
from ..store.lifecycle import retention


def _age(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        days = parse_days(value, "--older-than")
    except ConfigError as error:
        raise click.BadParameter(str(error).removeprefix("--older-than ")) from None
    if days <= 0:
        raise click.BadParameter("must be more than 0 (0 would delete every finished job)")
    return days


@click.command("prune")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; delete nothing.")
@click.option(
    "--older-than",
    callback=_age,
    metavar="AGE",
    help="Remove succeeded and failed jobs finished longer ago than AGE (7d, 12h, 1.5) instead of "
    "JOB_RETENTION_SUCCEEDED / JOB_RETENTION_FAILED.",
)
@click.option(
    "--batch-size", type=click.IntRange(1, 100_000), default=retention.BATCH_SIZE, show_default=True
)
@with_appcontext
def prune_command(dry_run: bool, older_than: float | None, batch_size: int) -> None:
    """Delete finished jobs past their retention, with their events, in small batches.

    Same code as the workers' retention pass (one pruner at a time: if another process is
    pruning, this stops and says so). Prints what it removed.
    """
    ops = settings_of(current_app).ops
    if older_than is not None:
        days = dict.fromkeys(retention.STATUSES, older_than)
    else:
        days = {"succeeded": ops.retention_succeeded_days, "failed": ops.retention_failed_days}
    limits = retention.cutoffs(days)
    if dry_run:
        click.echo(retention.count_expired(limits).describe(dry_run=True))
        return
    removed = retention.prune(limits, batch_size=batch_size)
    click.echo(removed.describe())
    if removed.busy:
        raise SystemExit(1)
