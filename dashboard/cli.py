"""CLI commands: ``flask --app wsgi worker``, its options generated from the settings, and
``flask --app wsgi schedules`` (list; ``pause``, ``resume``, ``run`` one by name).
``flask --app wsgi queues [list | pause NAME | resume NAME]``; ``flask --app wsgi workflows``
(``show``, ``cancel``, ``retry`` one by id: ``cli_workflows.py``).

Every field of :class:`~.config.WorkerSettings` (and of :class:`~.config.OpsSettings`) declared
with ``option=True`` becomes an option of ``flask worker`` that overrides its environment
variable: the name from the field (``poll_interval_ms`` -> ``--poll-interval-ms``, or its
``flag``), the type and range from its parser and bounds, the help from the setting's one
description, with the variable.
A boolean is a ``--name/--no-name`` pair, the log level a choice of :data:`LOG_LEVELS`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
from collections.abc import Callable
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext
from flask.globals import app_ctx
from flask.logging import default_handler

from .cli_workflows import workflows_command
from .config import ConfigError, OpsSettings, WorkerSettings, help_of
from .config.parsers import (
    LOG_LEVELS,
    parse_processes,
    parse_queues,
    read_bool,
    read_int,
    read_log_level,
    read_number,
    read_processes,
    read_queues,
)
from .extension import door
from .logsafe import SafeFormatter
from .mount import Mount

LOG_FORMAT = "%(asctime)s %(levelname)-7s [%(threadName)s] %(name)s: %(message)s"


@door
def mount_commands(app: Flask, mount: Mount) -> None:
    """The commands, as :func:`init_app` registers them for the mount."""
    init_app(app, embedded=mount.embedded)


def init_app(app: Flask, *, embedded: bool = False) -> None:
    """Register the project's commands on ``app``: ``flask worker``, ``flask schedules``,
    ``flask queues`` and ``flask workflows``; in a host's app only ``flask worker`` at the top,
    the queue's other commands under ``flask jobqueue`` (a host's own command names are left
    to it)."""
    app.cli.add_command(worker_command)
    if embedded:
        app.cli.add_command(jobqueue_group)
    else:
        app.cli.add_command(schedules_command)
        app.cli.add_command(queues_command)
        app.cli.add_command(workflows_command)


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value!r}")
    return value


def _queues(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    try:
        return parse_queues(value, "--queues")
    except ConfigError as error:
        raise click.BadParameter(str(error)) from None


def _processes(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_processes(value, "--processes")
    except ConfigError as error:
        raise click.BadParameter(str(error)) from None


def _upper(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else value.upper()


def setting_option(spec: dataclasses.Field[Any]) -> click.Option:
    """The command-line option of one settings field (declared with ``option=True``), its help
    the setting's description (:func:`~.config.help_of`).

    Unset options stay ``None``: the environment's value (or the default) holds.
    """
    meta = spec.metadata
    flag = "--" + (meta["flag"] or spec.name.replace("_", "-"))
    bounds = meta["options"]
    help_text = help_of(spec)
    parser = meta["parser"]
    if parser is read_bool:
        return click.Option([f"{flag}/--no-{flag[2:]}", spec.name], default=None, help=help_text)
    if parser is read_int:
        kind: click.ParamType[Any] = click.IntRange(bounds.get("minimum"), bounds.get("maximum"))
        return click.Option([flag, spec.name], type=kind, help=help_text)
    if parser is read_number:
        kind = click.FloatRange(bounds.get("minimum"), bounds.get("maximum"))
        return click.Option([flag, spec.name], type=kind, callback=_finite, help=help_text)
    if parser is read_queues:
        return click.Option([flag, spec.name], type=str, callback=_queues, help=help_text)
    if parser is read_processes:
        return click.Option(
            [flag, spec.name], type=str, callback=_processes, metavar="N|auto", help=help_text
        )
    if parser is read_log_level:
        kind = click.Choice(LOG_LEVELS, case_sensitive=False)
        return click.Option([flag, spec.name], type=kind, callback=_upper, help=help_text)
    raise TypeError(f"{meta['env']}: no command-line option for settings read by {parser.__name__}")


def setting_options(settings_class: type[Any]) -> list[click.Option]:
    """The options of every field of ``settings_class`` that has one, in field order."""
    return [
        setting_option(spec) for spec in dataclasses.fields(settings_class) if spec.metadata.get("option")
    ]


def configure_logging(level: str) -> None:
    """Log to stderr: the project's loggers at ``level``, everything else at WARNING.

    Third-party loggers stay at WARNING so that ``DEBUG`` shows the worker's polls, claims and
    executions, not every SQL statement.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(LOG_FORMAT))  # a value cannot forge a line
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    project = logging.getLogger("dashboard")
    project.removeHandler(default_handler)  # Flask's app logger handler would log twice
    project.setLevel(level)


@click.command("worker")
@with_appcontext
def worker_command(**options: Any) -> None:
    """Run job worker threads until SIGINT/SIGTERM.

    Options override the JOB_WORKER_* environment variables. The first signal stops claiming
    and lets running jobs finish (exit 0); a second one exits at once (exit 128 + signal).
    With --processes N above 1, a supervisor runs N such worker processes and stops them all.
    """
    from .runtime import supervisor

    child = supervisor.supervised()  # first: a supervisor's child asks to die with it
    from .config import settings_of
    from .extensions import engine
    from .ops import schema
    from .ops.logs import install as install_logs
    from .runtime.handlers import registered_types
    from .runtime.worker import Worker, settings_banner

    app = app_ctx.app  # the app itself, not the proxy: it is kept past this context
    given = {name: value for name, value in options.items() if value is not None}
    ops_fields = {spec.name for spec in dataclasses.fields(OpsSettings)}
    app_settings = settings_of(app)
    settings = dataclasses.replace(
        app_settings.worker, **{name: value for name, value in given.items() if name not in ops_fields}
    )
    ops = dataclasses.replace(
        app_settings.ops, **{name: value for name, value in given.items() if name in ops_fields}
    )
    if child is not None:  # one worker process of a supervisor's: the duties in the first only
        settings = dataclasses.replace(settings, processes=1, schedules=settings.schedules and child.duties)
        ops = dataclasses.replace(ops, worker_metrics_port=child.metrics_port(ops.worker_metrics_port))
    _check_pool(app, settings.threads)
    _check_metrics_ports(ops.worker_metrics_port, settings.processes)

    configure_logging(settings.log_level)
    install_logs(ops.log_format, project_level=settings.log_level)
    if child is not None:
        child.tag_logs()
    log = logging.getLogger("dashboard.runtime.worker")
    log.info(settings_banner(settings, registered_types()))
    log.info("database: %s", engine().url.render_as_string(hide_password=True))

    schema.require_current(app)  # an older schema: refuse to start, naming the command to run
    if settings.schedules and child is None:  # a supervisor syncs them once for its children
        from .runtime.scheduler import sync_declared

        try:
            sync_declared(app, settings)
        except ValueError as problem:  # a schedule that cannot be synced names itself
            raise click.ClickException(str(problem)) from None
    if settings.processes > 1:
        engine().dispose()  # the supervisor holds no connection: its children have their own
        sys.exit(supervisor.Supervisor(supervisor.child_command(), settings.processes).run())
    worker = Worker(
        app,
        settings,
        ops=ops,
        duties=child is None or child.duties,
        details=None if child is None else child.details(),
    )
    if child is not None:
        child.watch(worker.request_stop)
    sys.exit(worker.run_until_signalled())


worker_command.params.extend(setting_options(WorkerSettings) + setting_options(OpsSettings))


def _check_metrics_ports(port: int, processes: int) -> None:
    """A supervisor's children serve their metrics on ``port`` + their index: the last must be
    a port too."""
    if port and port + processes - 1 > 65535:
        raise click.UsageError(
            f"--processes {processes} serve their metrics on ports {port} to {port + processes - 1} "
            "(JOB_WORKER_METRICS_PORT + the process's index): lower JOB_WORKER_METRICS_PORT (--metrics-port)"
        )


def _check_pool(app: Flask, threads: int) -> None:
    """Every thread keeps a connection, and batch mode adds a dispatcher and a completer.

    The standalone app sizes its pool from ``JOB_WORKER_THREADS``; a host's app has its own
    engine, whose pool is read as it is."""
    from .mount import mount_of

    needed = threads + 5  # the rescuer, the scheduler, and in batch mode the dispatcher and the completer
    if mount_of(app).embedded:
        from .extensions import engine

        pool = engine().pool
        capacity = int(getattr(pool, "size", lambda: 5)()) + max(0, int(getattr(pool, "_max_overflow", 0)))
        if needed > capacity:
            raise click.UsageError(
                f"--threads {threads} needs {needed} database connections but the app's pool holds "
                f"{capacity}; raise pool_size / max_overflow in SQLALCHEMY_ENGINE_OPTIONS"
            )
        return
    options = app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {})
    capacity = int(options.get("pool_size", 5)) + int(options.get("max_overflow", 0))
    if needed > capacity:
        raise click.UsageError(
            f"--threads {threads} needs {needed} database connections but the pool holds {capacity}; "
            f"set JOB_WORKER_THREADS={threads} in the environment instead, so the pool is sized for them"
        )


jobqueue_group = AppGroup("jobqueue", help="The job queue's commands (migrations, retention, credentials).")


@jobqueue_group.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="The queue's revision to migrate to.")
@with_appcontext
def upgrade_command(revision: str) -> None:
    """Bring the queue's tables to head in this app's database (version table
    jobqueue_alembic_version; the app's own migrations are left alone)."""

    from .migrating import upgrade_embedded
    from .mount import EMBEDDED_VERSION_TABLE

    upgrade_embedded(current_app._get_current_object(), revision)  # type: ignore[attr-defined]
    click.echo(f"the queue's tables are at {revision} ({EMBEDDED_VERSION_TABLE})")


def _add_queue_commands() -> None:
    from .auth.commands import hash_password_command, new_token_command
    from .ops.commands import prune_command

    for command in (
        prune_command,
        hash_password_command,
        new_token_command,
        schedules_command,
        queues_command,
        workflows_command,
    ):
        jobqueue_group.add_command(command)


def _actor() -> str:
    """Who acts from the command line (``auth.principals.command_line_actor``)."""
    from .auth.principals import command_line_actor

    return command_line_actor()


@click.group("schedules", invoke_without_command=True)
@click.pass_context
@with_appcontext
def schedules_command(ctx: click.Context) -> None:
    """List the schedules with their next runs; pause, resume or run one now."""
    if ctx.invoked_subcommand is not None:
        return
    from .store.reads import schedules as read_schedules

    rows = read_schedules.list_schedules(upcoming=3)
    if not rows:
        click.echo("No schedules: declare them with schedule(...) in a module JOB_HANDLER_MODULES names.")
        return
    for row in rows:
        last = (
            f"last run {row.last_run_at.isoformat()} ({row.last_job_status or 'gone'})"
            if row.last_run_at
            else "never run"
        )
        click.echo(
            f"{row.name}  [{row.state}]  {row.cron}  {row.words}  -> {row.job_type} on {row.queue}; {last}"
        )
        for slot in row.upcoming:
            click.echo(f"    next {slot.isoformat()}")


def _paused(name: str, paused: bool) -> None:
    from .store.flow import schedules

    actor = _actor()
    if not schedules.set_paused(name, paused, actor=actor, event_data={"source": "cli", "actor": actor}):
        raise click.ClickException(f"no schedule named {name!r}")
    click.echo(f"{name}: {'paused' if paused else 'resumed'}")


@schedules_command.command("pause")
@click.argument("name")
@with_appcontext
def schedules_pause(name: str) -> None:
    """Pause NAME: no slot is enqueued until it is resumed."""
    _paused(name, True)


@schedules_command.command("resume")
@click.argument("name")
@with_appcontext
def schedules_resume(name: str) -> None:
    """Resume NAME from its next slot after now."""
    _paused(name, False)


@schedules_command.command("run")
@click.argument("name")
@with_appcontext
def schedules_run(name: str) -> None:
    """Enqueue one run of NAME now, outside its slots."""
    from .store.flow import schedules

    try:
        job = schedules.run_now(name, event_data={"source": "cli", "actor": _actor()})
    except schedules.ScheduleRetired:
        raise click.ClickException(f"schedule {name!r} is retired: the code no longer declares it") from None
    if job is None:
        raise click.ClickException(f"no schedule named {name!r}")
    click.echo(f"{name}: job {job.id} enqueued ({job.idempotency_key})")


@click.group("queues", invoke_without_command=True)
@click.pass_context
@with_appcontext
def queues_command(ctx: click.Context) -> None:
    """List the named queues (paused, limits, ready/running counts), or pause or resume one."""
    if ctx.invoked_subcommand is None:
        _list_queues()


@queues_command.command("list")
@with_appcontext
def list_queues_command() -> None:
    """List the named queues (the same as ``flask queues``)."""
    _list_queues()


def _list_queues() -> None:
    from .store.reads import queues as figures

    board = figures.queue_board()
    found = board.queues
    if not found:
        click.echo("No queues yet: a queue appears with its first job or setting.")
        return
    click.echo(f"{'queue':<24} {'state':<7} {'ready':>7} {'running':>7}  limits")
    for q in found:
        limits = []
        if q.concurrency_limit is not None:
            limits.append(f"concurrency {q.slots_held}/{q.concurrency_limit}")
        if q.rate_limit is not None:
            limits.append(f"rate {q.rate_used}/{q.rate_limit.count} per {q.rate_limit.period_seconds:g}s")
        state = "paused" if q.paused else "active"
        ready = f">{q.cap}" if q.ready > q.cap else str(q.ready)
        click.echo(f"{q.name:<24} {state:<7} {ready:>7} {q.running:>7}  {', '.join(limits) or '-'}")
    if board.truncated:
        shown = f"showing {len(found):,} of {board.total:,} queues"
        click.echo(f"{shown}: the paused ones first, then the rest by name")


def _queue_change(change: Callable[..., bool], name: str, done: str, already: str) -> None:
    from .store.flow import queues

    try:
        queues.check_name(name)
    except ValueError as problem:
        raise click.BadParameter(str(problem), param_hint="NAME") from None
    actor = _actor()
    changed = change(name, actor=actor, event_data={"source": "cli", "actor": actor})
    click.echo(f"queue {name}: {done}" if changed else f"queue {name}: {already}")


@queues_command.command("pause")
@click.argument("name")
@with_appcontext
def pause_queue_command(name: str) -> None:
    """Pause NAME: no worker claims its jobs until it is resumed (running ones finish)."""
    from .store.flow import queues

    _queue_change(queues.pause, name, "paused", "already paused")


@queues_command.command("resume")
@click.argument("name")
@with_appcontext
def resume_queue_command(name: str) -> None:
    """Resume NAME and wake the idle workers serving it."""
    from .store.flow import queues

    _queue_change(queues.resume, name, "resumed", "was not paused")


_add_queue_commands()
