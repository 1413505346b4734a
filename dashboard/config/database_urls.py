"""PostgreSQL URLs naming one server or several, in libpq's form or SQLAlchemy's, made one.

A URL may list several hosts, so that the processes find the primary after a failover
(``target_session_attrs=read-write``: libpq tries each host in turn and keeps the first that
takes writes). Three spellings are accepted:

- libpq's own, which RDS, Patroni and most runbooks hand out:
  ``postgresql://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write``;
- SQLAlchemy's repeated ``host``: ``postgresql+psycopg://u:p@/db?host=h1:5432&host=h2:5433``;
- libpq's keywords as query parameters: ``postgresql://u:p@/db?host=h1,h2&port=5432,5433``.

:func:`normalise` turns each into the last one, with the ``postgresql+psycopg`` scheme: SQLAlchemy
reads it (its URL parser refuses the port list of the first), and rendered back as a libpq URI it
is one libpq reads too (the worker's LISTEN connection; libpq reads no ``host=h:port``). A URL
naming a single host is left as it is (only its scheme changes). :func:`problem` says what is
wrong with a malformed one, without repeating the URL (it may hold a password).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

SCHEMES = ("postgres://", "postgresql://", "postgresql+psycopg://")
PSYCOPG = "postgresql+psycopg://"
# libpq's values of target_session_attrs (PostgreSQL 14 and later)
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
_HOST_PORT = re.compile(r"^(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>[^:]*))?$")


class DatabaseUrlError(ValueError):
    """A PostgreSQL URL that cannot be used; the message names the fault, not the URL."""


def normalise(url: str) -> str:
    """``url`` with the ``postgresql+psycopg`` scheme and its hosts in the query
    (``?host=h1,h2&port=p1,p2``) when it names several; :class:`DatabaseUrlError` if malformed.

    A URL of another scheme (``sqlite://``) is returned as it is: SQLAlchemy then says what it
    thinks of it."""
    scheme = next((prefix for prefix in SCHEMES if url.startswith(prefix)), None)
    if scheme is None:
        return url
    rest = url[len(scheme) :]
    parts = urlsplit("//" + rest)
    netloc = parts.netloc
    userinfo, _, hostlist = netloc.rpartition("@") if "@" in netloc else ("", "", netloc)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query_hosts = [value for key, value in query if key == "host"]
    query_ports = [value for key, value in query if key == "port"]
    _check_session_attrs(query)
    if "," in hostlist:
        if query_hosts or query_ports:
            raise DatabaseUrlError("lists hosts both before the database name and in ?host=; use one form")
        hosts, ports = _split_pairs(hostlist.split(","), quoted=True)
    elif len(query_hosts) > 1 or any(_has_port(host) for host in query_hosts):
        if query_ports:
            raise DatabaseUrlError("mixes ?host=h:port with ?port=; use one form")
        hosts, ports = _split_pairs(query_hosts, quoted=False)
    else:
        if len(query_hosts) == 1 and "," in query_hosts[0]:
            _check_lists(query_hosts[0].split(","), query_ports[0].split(",") if query_ports else [])
        elif hostlist:
            _split_pairs([hostlist], quoted=True)  # one host: its port checked, the URL kept
        return PSYCOPG + rest
    kept = [(key, value) for key, value in query if key not in ("host", "port")]
    pairs = [("host", ",".join(hosts))]
    if any(ports):
        pairs.append(("port", ",".join(ports)))
    path = parts.path or "/"
    prefix = f"{userinfo}@" if userinfo else ""
    encoded = urlencode(pairs + kept, safe="/,:[]", quote_via=quote)
    return f"{PSYCOPG}{prefix}{path}?{encoded}"


def problem(url: str) -> str | None:
    """What is wrong with ``url`` (:func:`normalise`'s refusal), or ``None``."""
    try:
        normalise(url)
    except DatabaseUrlError as error:
        return str(error)
    return None


def host_count(url: str) -> int:
    """How many servers a (normalised or not) URL names; 1 for a URL of one host or none."""
    query = parse_qsl(urlsplit(normalise(url)).query)
    hosts = [value for key, value in query if key == "host"]
    return len(hosts[0].split(",")) if hosts else 1


def _has_port(host: str) -> bool:
    if host.startswith("["):
        return "]:" in host
    return not host.startswith("/") and ":" in host


def _split_pairs(entries: list[str], *, quoted: bool) -> tuple[list[str], list[str]]:
    """``host[:port]`` entries (``[v6]:port`` for an IPv6 address, a percent-encoded Unix
    socket folder before the database name) as a list of hosts and one of ports ('' where none)."""
    hosts: list[str] = []
    ports: list[str] = []
    for position, entry in enumerate(entries, start=1):
        which = f"host {position} of the list" if len(entries) > 1 else "the host"
        match = _HOST_PORT.match(entry)
        if match is None:
            raise DatabaseUrlError(f"{which} ({_shown(entry)}) is not host[:port]")
        host, port = match.group("host"), match.group("port")
        if port is not None and not port:
            raise DatabaseUrlError(f"{which} has an empty port after ':'")
        host = unquote(host) if quoted else host
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        hosts.append(host)
        ports.append(port or "")
    _check_lists(hosts, ports)
    return hosts, ports


def _check_lists(hosts: list[str], ports: list[str]) -> None:
    for position, host in enumerate(hosts, start=1):
        if not host.strip():
            raise DatabaseUrlError(f"host {position} of the list is empty")
    if ports and len(ports) != len(hosts) and len(ports) != 1:
        raise DatabaseUrlError(f"names {len(hosts)} hosts but {len(ports)} ports")
    for position, port in enumerate(ports, start=1):
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            which = f"port {position} of the list" if len(ports) > 1 else "the port"
            raise DatabaseUrlError(f"{which} ({_shown(port)}) is not a port number (1 to 65535)")


def _check_session_attrs(query: list[tuple[str, str]]) -> None:
    for key, value in query:
        if key == "target_session_attrs" and value not in SESSION_ATTRS:
            raise DatabaseUrlError(
                f"target_session_attrs must be one of {', '.join(SESSION_ATTRS)}, got {_shown(value)}"
            )


def _shown(text: str) -> str:
    """A fragment of the URL for a message: a host or a port, never more than 40 characters."""
    return repr(text if len(text) <= 40 else text[:37] + "...")
