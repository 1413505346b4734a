"""gunicorn.conf.py: the web process's settings and hooks."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path
from types import ModuleType

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


def load_conf() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gunicorn_conf", CONF)
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
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
