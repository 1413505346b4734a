"""Settings: the reference's defaults, parsing, and clear errors for bad values."""

import dataclasses

import pytest

from dashboard.config import DEV_SECRET_KEY, ConfigError, Settings, WorkerSettings
from dashboard.state import state_of


def test_defaults_are_the_references():
    s = Settings.from_env({})
    assert s.debug is True and s.enable_debug_toolbar is True
    assert s.secret_key == DEV_SECRET_KEY
    assert s.allowed_hosts == ("localhost", "127.0.0.1", "0.0.0.0")
    assert s.cors_allowed_origins == ()
    assert s.internal_ips == ("127.0.0.1", "localhost", "host.docker.internal")
    assert (s.postgres_db, s.postgres_user, s.postgres_password, s.postgres_port) == (
        "job_queue",
        "postgres",
        "postgres",
        5432,
    )
    assert s.postgres_host is None and s.database_url is None
    assert s.conn_max_age == 0 and s.time_zone == "UTC"
    assert s.worker == WorkerSettings(
        threads=4,
        poll_interval_ms=500,
        lease_seconds=30,
        cleanup_interval_seconds=5,
        cleanup_batch_size=100,
        backoff_base_seconds=5,
        backoff_max_seconds=300,
        max_attempts_default=3,
        log_level="INFO",
        handler_modules=(),
        demo_handlers=True,  # on in development
    )


def test_values_are_parsed_including_fractions_and_lists():
    s = Settings.from_env(
        {
            "DEBUG": "false",
            "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": "0.2",
            "JOB_WORKER_THREADS": "16",
            "JOB_WORKER_LOG_LEVEL": "debug",
            "JOB_HANDLER_MODULES": "app.jobs, other.jobs ,",
            "ALLOWED_HOSTS": "example.com",
            "TIME_ZONE": "Asia/Tehran",
        }
    )
    assert s.debug is False and s.enable_debug_toolbar is False
    assert s.worker.cleanup_interval_seconds == 0.2
    assert s.worker.threads == 16 and s.worker.log_level == "DEBUG"
    assert s.worker.handler_modules == ("app.jobs", "other.jobs")
    assert s.allowed_hosts == ("example.com",)
    assert s.tz.key == "Asia/Tehran"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOB_WORKER_THREADS", "0"),
        ("JOB_WORKER_THREADS", "four"),
        ("JOB_WORKER_LEASE_SECONDS", "nan"),
        ("JOB_WORKER_POLL_INTERVAL_MS", "-1"),
        ("JOB_WORKER_LOG_LEVEL", "LOUD"),
        ("DEBUG", "maybe"),
        ("TIME_ZONE", "Mars/Olympus"),
        ("POSTGRES_PORT", "x"),
        ("DATABASE_URL", "postgresql://u@h1:5432,,h2:5432/db"),
        ("DATABASE_URL", "postgresql://u@h1:x,h2/db"),
        ("DATABASE_REPLICA_URL", "postgresql://u@/db?host=a,b&port=1,2,3"),
        ("DATABASE_DIRECT_URL", "postgresql://u@h1,h2/db?target_session_attrs=rw"),
        ("DATABASE_REPLICA_MAX_LAG_SECONDS", "-1"),
    ],
)
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: value})


def test_worker_settings_are_shown_under_their_environment_names():
    shown = WorkerSettings().as_dict()
    assert shown["JOB_WORKER_THREADS"] == 4 and shown["JOB_WORKER_LEASE_SECONDS"] == 30
    assert shown["JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS"] == 3.0
    assert shown["JOB_WORKER_HEARTBEAT_SECONDS"] == 5.0
    assert shown["JOB_WORKER_PROGRESS_FLUSH_MS"] == 250.0
    assert shown["JOB_WORKER_SCHEDULES"] is True
    assert shown["JOB_WORKER_QUEUES"] is None  # every queue
    assert shown["JOB_WORKER_PROCESSES"] == 1
    assert len(shown) == 19


def test_job_types_strict_and_the_shutdown_timeout_are_read_from_the_environment():
    assert Settings.from_env({}).job_types_strict is False
    assert Settings.from_env({"JOB_TYPES_STRICT": "true"}).job_types_strict is True
    settings = Settings.from_env({"JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS": "0.5"})
    assert settings.worker.shutdown_timeout_seconds == 0.5
    with pytest.raises(ConfigError, match="JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS"):
        Settings.from_env({"JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS": "-1"})


@pytest.mark.parametrize(
    ("env", "demo"),
    [
        ({}, True),
        ({"DEBUG": "false"}, False),
        ({"DEBUG": "false", "JOB_DEMO_HANDLERS": "true"}, True),
        ({"DEBUG": "true", "JOB_DEMO_HANDLERS": "false"}, False),
    ],
)
def test_demo_handlers_default_to_debug(env, demo):
    assert Settings.from_env(env).worker.demo_handlers is demo


def test_the_defaults_written_on_the_fields_are_what_an_empty_environment_reads():
    """A derived default (``derived=``) is read from its sources; the field's own default is
    the same value, so settings built in code agree with those read from nothing."""
    assert Settings.from_env({}) == Settings()


@pytest.mark.parametrize(
    ("env", "toolbar", "pooled"),
    [
        ({}, True, False),
        ({"DEBUG": "false"}, False, False),
        ({"DEBUG": "false", "ENABLE_DEBUG_TOOLBAR": "true"}, True, False),
        ({"DATABASE_DIRECT_URL": "postgresql://db/x"}, True, True),
        ({"DATABASE_DIRECT_URL": "postgresql://db/x", "DATABASE_POOLED": "false"}, True, False),
        ({"DATABASE_POOLED": "true"}, True, True),
    ],
)
def test_derived_defaults_follow_their_sources_unless_set(env, toolbar, pooled):
    settings = Settings.from_env(env)
    assert (settings.enable_debug_toolbar, settings.ops.database_pooled) == (toolbar, pooled)


def test_a_derived_default_names_a_malformed_source():
    from dashboard.config import OpsSettings

    with pytest.raises(ConfigError, match="DEBUG must be true or false"):
        WorkerSettings.from_env({"DEBUG": "maybe"})  # JOB_DEMO_HANDLERS follows DEBUG
    assert OpsSettings.from_env({"DATABASE_DIRECT_URL": " "}).database_pooled is False  # blank: unset


def test_secret_key_strength_needs_variety_not_only_length():
    import secrets

    from dashboard.config import secret_key_is_strong

    assert not secret_key_is_strong("a" * 32)
    assert not secret_key_is_strong("a" * 200)
    assert not secret_key_is_strong("ab" * 40)
    assert not secret_key_is_strong("0123456789" * 4)  # digits only: 10 distinct
    assert secret_key_is_strong(secrets.token_urlsafe(48))
    assert secret_key_is_strong(secrets.token_hex(32))


@pytest.mark.parametrize(
    ("env", "migrates"),
    [
        ({}, True),  # the embedded database: a newcomer's start migrates it
        ({"DATABASE_URL": "postgresql://db/x"}, False),  # a real database: its deploy migrates it
        ({"POSTGRES_HOST": "db"}, False),
        ({"DATABASE_URL": "postgresql://db/x", "AUTO_MIGRATE": "true"}, True),
        ({"AUTO_MIGRATE": "false"}, False),
        ({"AUTO_MIGRATE": "off"}, False),
        ({"AUTO_MIGRATE": ""}, True),  # blank is unset
    ],
)
def test_auto_migrate_is_a_setting_on_by_default_only_for_the_embedded_database(env, migrates):
    assert Settings.from_env(env).migrates_at_start is migrates


def test_auto_migrate_and_the_instance_path_are_read_like_every_setting(tmp_path):
    with pytest.raises(ConfigError, match="AUTO_MIGRATE must be true or false"):
        Settings.from_env({"AUTO_MIGRATE": "sometimes"})
    assert Settings.from_env({"INSTANCE_PATH": str(tmp_path)}).instance_path == str(tmp_path)
    default = Settings.from_env({"INSTANCE_PATH": " "}).instance_path  # blank is unset
    assert default.endswith("/instance") and default == Settings().instance_path


def test_create_app_takes_the_instance_path_and_auto_migrate_from_its_config_too(tmp_path):
    from dashboard import create_app

    unused = "postgresql://unused.invalid/unused"  # building the app never connects
    app = create_app({"DATABASE_URL": unused, "AUTO_MIGRATE": False, "INSTANCE_PATH": str(tmp_path)})
    assert app.instance_path == str(tmp_path)
    assert state_of(app).settings.migrates_at_start is False


def test_the_worker_options_are_generated_from_the_settings_fields():
    """Each field with an ``option`` help is an option: its name, its variable in the help, its
    range from the parser's bounds; the others are not options."""
    import click

    from dashboard.cli import worker_command
    from dashboard.config import OpsSettings

    options = {p.name: p for p in worker_command.params if isinstance(p, click.Option)}
    assert set(options) == {
        "threads",
        "processes",
        "poll_interval_ms",
        "lease_seconds",
        "cleanup_interval_seconds",
        "cleanup_batch_size",
        "backoff_base_seconds",
        "backoff_max_seconds",
        "log_level",
        "batch_size",
        "listen",
        "schedules",
        "queues",
        "worker_metrics_port",
    }
    fields = {f.name: f for f in (*dataclasses.fields(WorkerSettings), *dataclasses.fields(OpsSettings))}
    for name, option in options.items():
        assert f"[{fields[name].metadata['env']}]" in (option.help or ""), name
    assert options["threads"].opts == ["--threads"] and options["threads"].type.min == 1
    assert options["lease_seconds"].type.min == 0.01
    assert options["worker_metrics_port"].opts == ["--metrics-port"]
    assert (options["worker_metrics_port"].type.min, options["worker_metrics_port"].type.max) == (0, 65535)
    assert options["listen"].opts == ["--listen"] and options["listen"].secondary_opts == ["--no-listen"]
    assert list(options["log_level"].type.choices) == ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    # the help is the setting's one description (the docs page's), as plain text
    assert options["processes"].help == (
        "Worker processes flask worker runs, each with JOB_WORKER_THREADS threads; auto: one per CPU it "
        "may run on. More than 1 starts a supervisor that runs them, restarts one that dies and stops "
        "them all on SIGINT/SIGTERM; the first of them alone runs the rescuer, the scheduler and "
        "retention. [JOB_WORKER_PROCESSES]"
    )
    assert not [name for name, option in options.items() if "`" in (option.help or "")]


def test_the_worker_processes_are_a_count_or_auto_and_a_bad_value_names_its_source(monkeypatch):
    from click.testing import CliRunner

    from dashboard.cli import worker_command
    from dashboard.config import parsers

    assert WorkerSettings.from_env({}).processes == 1
    assert WorkerSettings.from_env({"JOB_WORKER_PROCESSES": " 3 "}).processes == 3
    monkeypatch.setattr(parsers.os, "process_cpu_count", lambda: 6, raising=False)
    assert WorkerSettings.from_env({"JOB_WORKER_PROCESSES": "AUTO"}).processes == 6
    monkeypatch.setattr(parsers.os, "process_cpu_count", lambda: None, raising=False)
    assert WorkerSettings.from_env({"JOB_WORKER_PROCESSES": "auto"}).processes == 1  # unknown: one
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ConfigError, match="JOB_WORKER_PROCESSES must be a whole number >= 1 or auto"):
            WorkerSettings.from_env({"JOB_WORKER_PROCESSES": bad})
    result = CliRunner().invoke(worker_command, ["--processes", "none"])
    assert result.exit_code == 2 and "--processes must be a whole number >= 1 or auto" in result.output


def test_the_metrics_port_is_a_port_in_the_environment_too():
    with pytest.raises(ConfigError, match="JOB_WORKER_METRICS_PORT must be <= 65535"):
        Settings.from_env({"JOB_WORKER_METRICS_PORT": "70000"})


def test_the_served_queues_are_read_checked_and_blank_means_every_queue():
    assert WorkerSettings.from_env({"JOB_WORKER_QUEUES": "mail, reports,mail"}).queues == ("mail", "reports")
    assert WorkerSettings.from_env({"JOB_WORKER_QUEUES": " , "}).queues is None
    with pytest.raises(ConfigError, match="JOB_WORKER_QUEUES"):
        WorkerSettings.from_env({"JOB_WORKER_QUEUES": "mail,no way"})


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("postgresql://u:secret@h1:5432,,h2:5432/db", "host 2 of the list is empty"),
        ("postgresql://u:secret@h1:99999,h2/db", "port 1 of the list ('99999') is not a port number"),
        ("postgresql://u:secret@h1:,h2/db", "host 1 of the list has an empty port"),
        ("postgresql://u:secret@h1,h2/db?host=h3", "both before the database name and in ?host="),
        ("postgresql+psycopg://u:secret@/db?host=h1:1&host=h2:2&port=3", "mixes ?host=h:port with ?port="),
        ("postgresql://u:secret@/db?host=a,b&port=1,2,3", "names 2 hosts but 3 ports"),
        ("postgresql://u:secret@h1,h2/db?target_session_attrs=rw", "target_session_attrs must be one of"),
    ],
)
def test_a_malformed_host_list_is_a_start_up_error_naming_the_setting_and_not_the_password(url, fault):
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"DATABASE_URL": url})
    message = str(refused.value)
    assert message.startswith("DATABASE_URL: ") and fault in message
    assert "secret" not in message


def test_the_replica_settings_are_off_by_default_and_read_when_set():
    assert Settings.from_env({}).ops.database_replica_url is None
    assert Settings.from_env({}).ops.database_replica_max_lag_seconds == 30.0
    ops = Settings.from_env(
        {"DATABASE_REPLICA_URL": "postgresql://r/db", "DATABASE_REPLICA_MAX_LAG_SECONDS": "2.5"}
    ).ops
    assert ops.database_replica_url == "postgresql://r/db" and ops.database_replica_max_lag_seconds == 2.5
