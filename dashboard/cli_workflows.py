"""``flask --app wsgi workflows``: show one workflow, cancel it, or retry its failed jobs.

The commands read through ``store/reads/workflows.py`` and act through
``store/lifecycle/dependents.py``, as ``/api/workflows/{workflow}/`` does: the same bounds (at
most 500 jobs listed, each count read up to its cap), the same events (``cancelled``,
``manual_retry``) recording the actor (``cli:`` and the operating-system user) and the
workflow. ``--dry-run`` prints what an action would change and changes nothing.

An id no workflow can have is a usage error (exit 2) naming ``WORKFLOW``; one that no job has
exits 1 saying so. Whoever can run ``flask`` holds the database's credentials: the commands
are an operator's, as ``flask queues`` and ``flask schedules`` are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from flask.cli import with_appcontext

from .auth.principals import command_line_actor

if TYPE_CHECKING:
    from .store.reads.workflows import Counts

SHOWN = 50  # jobs `show` prints, unless --all


@click.group("workflows")
def workflows_command() -> None:
    """Show a workflow (its counts and jobs), cancel it, or retry its failed jobs."""


def _counts(workflow: str) -> Counts:
    """The workflow's counts, or the command's error."""
    from .store.lifecycle import dependents
    from .store.reads import workflows

    if problem := dependents.workflow_problem(workflow):
        raise click.BadParameter(f"a workflow id {problem}", param_hint="WORKFLOW")
    counts = workflows.counts(workflow)
    if counts.total == 0:
        raise click.ClickException(f"no workflow {workflow!r}: no job belongs to it")
    return counts


def _summary(counts: Counts) -> str:
    parts = [f"{n:,} {state}" for state, n in counts.as_dict().items() if n]
    more = " (a count reached its cap: there are more)" if counts.capped else ""
    return f"{counts.total:,} jobs: {', '.join(parts)}{more}"


@workflows_command.command("show")
@click.argument("workflow")
@click.option("--all", "show_all", is_flag=True, help="List every job read (at most 500), not the first 50.")
@with_appcontext
def show_workflow(workflow: str, show_all: bool) -> None:
    """Show WORKFLOW: its counts by state, then its jobs, oldest first, each with its parents."""
    from .store.reads import workflows

    _counts(workflow)  # the checks and the 404
    found = workflows.workflow(workflow)
    if found is None:  # its last job was deleted meanwhile
        raise click.ClickException(f"no workflow {workflow!r}: no job belongs to it")
    click.echo(f"workflow {workflow}: {_summary(found.counts)}")
    shown = found.jobs if show_all else found.jobs[:SHOWN]
    for node in shown:
        parents = ", ".join(str(parent)[:8] for parent in node.depends_on)
        waits = f"  waits for {node.waiting_on}" if node.waiting else ""
        after = f"  after {parents}" if parents else ""
        click.echo(f"  {node.id}  {node.state:<9}  {node.type}{after}{waits}")
    if len(shown) < found.counts.total:
        click.echo(f"  ... {len(shown):,} of {found.counts.total:,} jobs listed")


def _event_data(workflow: str) -> dict[str, Any]:
    return {"source": "cli", "actor": command_line_actor(), "workflow": workflow}


@workflows_command.command("cancel")
@click.argument("workflow")
@click.option("--dry-run", is_flag=True, help="Only count the jobs it would cancel.")
@with_appcontext
def cancel_workflow(workflow: str, dry_run: bool) -> None:
    """Cancel every queued job of WORKFLOW, waiting ones included (running ones finish)."""
    from .store.lifecycle import dependents
    from .store.values import pg_safe

    counts = _counts(workflow)
    if dry_run:
        more = "at least " if counts.capped else ""
        click.echo(f"workflow {workflow}: would cancel {more}{counts.queued + counts.waiting:,} jobs")
        return
    data = _event_data(workflow)
    message = pg_safe(f"Cancelled by {data['actor']}")
    cancelled = dependents.cancel_workflow(workflow, event_data=data, message=message)
    click.echo(f"workflow {workflow}: {cancelled:,} jobs cancelled")


@workflows_command.command("retry")
@click.argument("workflow")
@click.option("--dry-run", is_flag=True, help="Only count the jobs it would retry.")
@with_appcontext
def retry_workflow(workflow: str, dry_run: bool) -> None:
    """Retry the failed jobs of WORKFLOW (cancelled ones too), at most 10,000 a run; their
    waiting dependents are released as they succeed."""
    from .store.lifecycle import dependents

    counts = _counts(workflow)
    if dry_run:
        failed = min(counts.failed + counts.cancelled, dependents.WORKFLOW_RETRY_MAX)
        more = "at least " if counts.capped else ""
        click.echo(f"workflow {workflow}: would retry {more}{failed:,} jobs")
        return
    retried = dependents.retry_workflow(workflow, event_data=_event_data(workflow))
    click.echo(f"workflow {workflow}: {retried:,} jobs retried")
