"""Generate the documentation's reference pages: configuration and HTTP API.

``python -m scripts.docs`` writes ``docs/reference/configuration.md`` (from the settings' fields:
each one's variable, default or derivation, parser and description, :mod:`dashboard.config`)
and ``docs/reference/api.md`` (from the OpenAPI document the app
serves at ``/api/schema/``). ``--check`` writes nothing and exits 1 when a checked-in page
differs from what would be written. Both pages are built from an app made with a fixed
environment, so the output does not depend on the machine or the shell that runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION_PAGE = ROOT / "docs" / "reference" / "configuration.md"
API_PAGE = ROOT / "docs" / "reference" / "api.md"
REGENERATE = "python -m scripts.docs"
# The app the API page is read from: nothing configured but what makes it start without a
# database (it never connects) and without sign-in (the document is the same either way).
FIXED_ENV = {
    "DATABASE_URL": "postgresql://docs@127.0.0.1:9/docs",
    "AUTO_MIGRATE": "false",
    "DEBUG": "false",
    "AUTH_DISABLED": "true",
    "SECRET_KEY": "documentation-build-key-" + "x7Qp2Lm9Rt4Vw8Yz3Bc6Nd1Fg5Hj0Ks",
    "JOB_DEMO_HANDLERS": "false",
    "JOB_HANDLER_MODULES": "",
}
# Variables that gunicorn.conf.py reads for the web server itself (not app settings).
GUNICORN_VARIABLES = (
    ("PORT", "`8000`", "Port gunicorn binds (honcho and most platforms set it)."),
    (
        "WEB_HOST",
        "(unset)",
        "Address gunicorn binds; unset: `0.0.0.0` with `DEBUG=false`, else `127.0.0.1` (the "
        "development dashboard, which has no sign-in, answers this machine only).",
    ),
    ("WEB_CONCURRENCY", "`2`", "gunicorn worker processes."),
    ("WEB_THREADS", "`4`", "Threads per gunicorn worker process."),
    (
        "GUNICORN_CONTROL_SOCKET",
        "(unset: off)",
        "Path of gunicorn's control socket, one per instance; unset, the socket is off.",
    ),
)


def cell(text: object) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped, ``code`` as `code`."""
    flat = " ".join(str(text).split())
    flat = re.sub(r"``(.+?)``", r"`\1`", flat)
    return flat.replace("|", "\\|")


# --- Configuration ------------------------------------------------------------------


def setting_fields() -> list[tuple[str, Field[Any]]]:
    """Every settings field that names an environment variable, with its group's title."""
    from dashboard.config import OpsSettings, Settings, WorkerSettings

    groups = (("Web, database and access", Settings), ("Worker", WorkerSettings), ("Operations", OpsSettings))
    return [(title, spec) for title, cls in groups for spec in fields(cls) if "env" in spec.metadata]


def setting_names() -> list[str]:
    """The environment variables the settings read, ``NAME_FILE`` companions included."""
    names = []
    for _, spec in setting_fields():
        names.append(spec.metadata["env"])
        if spec.metadata["parser"].__name__ == "read_entries":
            names.append(spec.metadata["env"] + "_FILE")
    return names


def default_text(spec: Field[Any]) -> str:
    """The field's default as the page shows it, never a secret's value."""
    from dashboard.config import PROJECT_ROOT

    meta = spec.metadata
    if meta["derived"] is not None:
        return str(meta["derived"].words)
    if meta["parser"].__name__ == "read_secret":
        return "a development-only key"
    value = spec.default if spec.default is not MISSING else spec.default_factory()  # type: ignore[misc]
    if value is None or value == ():
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return "`" + ",".join(str(part) for part in value) + "`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.startswith(PROJECT_ROOT):
        return "`" + os.path.relpath(value, PROJECT_ROOT) + "/` in the checkout"
    return f"`{value}`"


def accepts_text(spec: Field[Any]) -> str:
    """What a value must look like, from the field's parser and its bounds ("" for any text)."""
    meta = spec.metadata
    options = meta["options"]
    parser = meta["parser"].__name__
    low, high = options.get("minimum"), options.get("maximum")
    bounds = "".join([f" ≥ {low:g}" if low is not None else "", f", ≤ {high:,}" if high is not None else ""])
    readings = {
        "read_int": "whole number" + bounds,
        "read_number": "number" + bounds + " (fractions allowed)",
        "read_bool": "`true` or `false`",
        "read_list": "comma-separated list",
        "read_networks": "comma-separated addresses or networks, or `*`",
        "read_time_zone": "IANA time zone name",
        "read_log_level": "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`",
        "read_days": "days (`7`, `0.5`) or `90s`, `30m`, `12h`, `7d`, `2w`",
        "read_entries": "entries separated by commas or newlines",
        "read_secret": "secret text",
        "read_token": f"secret, at least {options.get('min_length')} characters",
        "read_processes": "whole number ≥ 1, or `auto`",
        "read_trace_url": "`http(s)://` URL with `{trace_id}` in it",
    }
    if parser == "read_choice":
        return " or ".join(f"`{choice}`" for choice in options["choices"])
    return readings.get(parser, "")


def configuration_page() -> str:
    """The configuration reference, every setting in its group, in field order."""
    out = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m scripts.docs` from the settings' field metadata",
        "     (dashboard/config/: settings.py, worker.py, ops.py): do not edit. -->",
        "",
        "Every setting is an environment variable, read once at start. A malformed value stops the",
        "start with a message that names the variable; every setting is safe when unset. A",
        "`flask worker` option, where there is one, overrides its variable for that process.",
        "*Accepts* says what a value must look like.",
        "",
    ]
    current = None
    for title, spec in setting_fields():
        meta = spec.metadata
        if title != current:
            if current is not None:
                out.append("")  # a blank line closes the table before the next heading
            current = title
            out += [
                f"## {title}",
                "",
                "| variable | default | what it does |",
                "| --- | --- | --- |",
            ]
        doc = meta["doc"]
        accepts = accepts_text(spec)
        what = f"{doc} *Accepts* {accepts}." if accepts else doc
        if meta.get("option"):
            flag = meta.get("flag") or spec.name.replace("_", "-")
            what += f" *Option* `flask worker --{flag}`."
        out.append(f"| `{meta['env']}` | {cell(default_text(spec))} | {cell(what)} |")
        if meta["parser"].__name__ == "read_entries":
            out.append(
                f"| `{meta['env']}_FILE` | (unset) | "
                f"A file of more `{meta['env']}` entries, one per line (`#` starts a comment), so secrets "
                "can live in a mounted file. *Accepts* a file path. |"
            )
    out += [
        "",
        "## The web server (gunicorn)",
        "",
        "Read by `gunicorn.conf.py` for the web process itself, not by the app.",
        "",
        "| variable | default | what it does |",
        "| --- | --- | --- |",
        *[f"| `{name}` | {default} | {cell(doc)} |" for name, default, doc in GUNICORN_VARIABLES],
        "",
    ]
    return "\n".join(out)


# --- HTTP API -------------------------------------------------------------------------


@contextmanager
def fixed_environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` holding only ``values`` for every setting name (others kept), restored after."""
    names = set(setting_names()) | set(values) | {"POSTGRES_HOST"}
    saved = {name: os.environ[name] for name in names if name in os.environ}
    try:
        for name in names:
            os.environ.pop(name, None)
        os.environ.update(values)
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)
        os.environ.update(saved)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document ``/api/schema/`` serves, from an app built with :data:`FIXED_ENV`."""
    from dashboard import create_app
    from dashboard.api.blueprint import routes
    from dashboard.api.openapi import build_document

    with fixed_environment(FIXED_ENV):
        app = create_app()
        with app.app_context():
            return build_document(app, routes)


def api_page(document: dict[str, Any] | None = None) -> str:
    """The HTTP API reference: every operation, then every schema."""
    from dashboard.api.docs import type_of

    doc = document if document is not None else openapi_document()
    info = doc["info"]
    out = [
        "# HTTP API reference",
        "",
        "<!-- Generated by `python -m scripts.docs` from the app's OpenAPI document: do not edit. -->",
        "",
        f"{cell(info.get('description', ''))}",
        "",
        f"{info['title']} {info['version']}, OpenAPI {doc['openapi']}. The running app serves this",
        "document at `/api/schema/` and a readable page at `/api/docs/`. How to use it (tokens, errors,",
        "paging): [Using the HTTP API](../http-api.md).",
        "",
        "| operation | summary |",
        "| --- | --- |",
    ]
    operations = [(path, method, op) for path, ops in doc["paths"].items() for method, op in ops.items()]
    for path, method, op in operations:
        out.append(f"| [`{method.upper()} {path}`](#{op['operationId']}) | {cell(op.get('summary', ''))} |")
    out += ["", "## Endpoints", ""]
    for path, method, op in operations:
        out += [f"### `{method.upper()} {path}` {{#{op['operationId']}}}", ""]
        if op.get("summary"):
            out += [f"**{cell(op['summary'])}.** {cell(op.get('description', ''))}", ""]
        if op.get("parameters"):
            out += [
                "| parameter | in | type | required | default | meaning |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
            for p in op["parameters"]:
                schema = p.get("schema", {})
                default = f"`{json.dumps(schema['default'])}`" if "default" in schema else ""
                required = "yes" if p.get("required") else "no"
                columns = [f"`{p['name']}`", p["in"], cell(type_of(schema)), required, cell(default)]
                out.append("| " + " | ".join([*columns, cell(p.get("description", ""))]) + " |")
            out.append("")
        if op.get("requestBody"):
            body = op["requestBody"]["content"]["application/json"]["schema"]
            out += [f"Body (`application/json`): {_schema_link(body, type_of)}", ""]
        out += ["| status | meaning | body |", "| --- | --- | --- |"]
        for status, response in op["responses"].items():
            bodies = ", ".join(
                f"{_schema_link(content.get('schema', {}), type_of)} ({media})"
                for media, content in (response.get("content") or {}).items()
            )
            out.append(f"| `{status}` | {cell(response.get('description', ''))} | {bodies} |")
        out.append("")
    out += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out += [f"### `{name}` {{#schema-{name}}}", ""]
        if schema.get("description"):
            out += [cell(schema["description"]), ""]
        if schema.get("properties"):
            out += ["| field | type | required | default | meaning |", "| --- | --- | --- | --- | --- |"]
            required = set(schema.get("required", []))
            for field_name, prop in schema["properties"].items():
                default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
                needed = "yes" if field_name in required else "no"
                columns = [f"`{field_name}`", cell(_schema_link(prop, type_of)), needed, cell(default)]
                out.append("| " + " | ".join([*columns, cell(prop.get("description", ""))]) + " |")
            out.append("")
        else:
            out += [f"Type: {cell(type_of(schema))}.", ""]
    return "\n".join(out)


def _schema_link(schema: dict[str, Any], type_of: Any) -> str:
    text = type_of(schema)
    if "$ref" in schema:
        return f"[{text}](#schema-{text})"
    return cell(text)


# --- Command ----------------------------------------------------------------------------


def pages() -> dict[Path, str]:
    """Every generated page and the text it should hold."""
    return {CONFIGURATION_PAGE: configuration_page(), API_PAGE: api_page()}


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` report the stale ones and exit 1."""
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if args.check and stale:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `{REGENERATE}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
