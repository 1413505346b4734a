"""The store's promise, checked on its source: no request, session, template or thread.

The store is called from web requests, worker threads and commands alike; it never starts a
thread (the web process's background recount runs in ``ops/recount.py``, the worker's
services in ``runtime/``) and never reads a request or renders a template (the doors do).
"""

from __future__ import annotations

import ast
from pathlib import Path

import dashboard.store

STORE = Path(dashboard.store.__file__).resolve().parent
FORBIDDEN_MODULES = {"threading", "_thread", "concurrent.futures", "multiprocessing", "jinja2", "flask_login"}
FORBIDDEN_FROM_FLASK = {"request", "session", "g", "render_template", "render_template_string", "url_for"}


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of every import in ``path``, inside functions too."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_no_store_module_imports_threads_requests_sessions_or_templates():
    modules = sorted(STORE.rglob("*.py"))
    assert len(modules) > 10  # the store itself, not an empty folder
    broken = [
        f"{path.name}: {module}{'.' + name if name else ''}"
        for path in modules
        for module, name in imports(path)
        if module.split(".")[0] in FORBIDDEN_MODULES
        or module in FORBIDDEN_MODULES
        or (module == "flask" and name in FORBIDDEN_FROM_FLASK)
    ]
    assert broken == []
