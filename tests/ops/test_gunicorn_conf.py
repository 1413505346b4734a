"""gunicorn.conf.py: the web process's settings and hooks."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.stack import free_port, gunicorn, healthy, stack_env
from tests.support.waiting import wait_until

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


def load_conf(**environ: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("gunicorn_conf", CONF)
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        spec.loader.exec_module(conf)
    return conf


def test_a_worker_freezes_what_the_app_allocated_at_startup():
    conf = load_conf()
    gc.unfreeze()  # nothing frozen before the hook: only the hook can make the count positive
    assert gc.get_freeze_count() == 0
    try:
        conf.post_worker_init(object())
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_control_socket_is_off_unless_an_instance_names_its_own(monkeypatch):
    monkeypatch.delenv("GUNICORN_CONTROL_SOCKET", raising=False)
    assert load_conf().control_socket_disable is True
    named = load_conf(GUNICORN_CONTROL_SOCKET="/run/jobqueue/web-1.ctl")
    assert named.control_socket_disable is False and named.control_socket == "/run/jobqueue/web-1.ctl"


@pytest.mark.process
def test_two_instances_of_one_user_leave_no_shared_control_socket(tmp_path, libpq_url):
    """Two gunicorns of one user (one HOME, one XDG_RUNTIME_DIR) start side by side and neither
    creates gunicorn's default control socket, which both would share."""
    home, runtime = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    env = stack_env(
        HOME=str(home), XDG_RUNTIME_DIR=str(runtime), DATABASE_URL=libpq_url, AUTO_MIGRATE="false"
    )
    env.pop("GUNICORN_CONTROL_SOCKET", None)
    ports = [free_port(), free_port()]
    webs = [gunicorn(port, env, tmp_path / f"web-{port}.log", workers=1) for port in ports]
    try:
        for port in ports:
            wait_until(lambda p=port: healthy(f"http://127.0.0.1:{p}"), 30, f"gunicorn on {port}")
        assert sorted(str(p) for p in (*home.rglob("*.ctl"), *runtime.rglob("*.ctl"))) == []
    finally:
        for web in webs:
            web.stop()


@pytest.mark.parametrize(
    ("environ", "bind"),
    [
        ({"PORT": "5000"}, "127.0.0.1:5000"),  # honcho start: the development dashboard, no sign-in
        ({}, "127.0.0.1:8000"),
        ({"DEBUG": "true", "PORT": "5000"}, "127.0.0.1:5000"),
        ({"DEBUG": "false", "PORT": "5000"}, "0.0.0.0:5000"),  # production refuses to serve unsigned
        ({"DEBUG": "false"}, "0.0.0.0:8000"),
        ({"WEB_HOST": "0.0.0.0", "PORT": "5000"}, "0.0.0.0:5000"),
        ({"WEB_HOST": "::1", "PORT": "5000"}, "[::1]:5000"),
    ],
)
def test_the_development_dashboard_listens_on_this_machine_only(monkeypatch, environ, bind):
    for name in ("PORT", "DEBUG", "WEB_HOST"):
        monkeypatch.delenv(name, raising=False)
    assert load_conf(**environ).bind == [bind]
