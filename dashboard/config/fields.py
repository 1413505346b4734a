"""How a setting is declared and read: one dataclass field, its metadata made by :func:`env`.

The metadata names the field's environment variable, its parser (:mod:`.parsers`) and the
parser's bounds, and holds the setting's one description (``doc``, Markdown). Everything
else says it from there: the documentation's configuration page (``python -m scripts.docs``),
and the help of the ``flask worker`` option of a field declared with ``option=True``
(:func:`help_of`, ``cli.py``).

The default is the field's default. A setting whose default is another's value, or follows
from others', says so with ``derived=`` (:class:`Derived`: :func:`follows`, :func:`when_set`);
reading the environment computes it from what the others read (:func:`read_value`), across
the settings classes (:func:`group` registers each), and the page prints its ``words``. The
field's own default is then what an empty environment reads (a test holds them equal), so a
settings object built in code without the environment gets the same value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T")

GROUPS: list[type[Any]] = []  # the settings classes, as :func:`group` registered them


def group(cls: type[T]) -> type[T]:
    """Register a settings class: its variables can be the sources of a :class:`Derived`."""
    GROUPS.append(cls)
    return cls


@dataclass(frozen=True)
class Derived:
    """The default of a setting left unset: ``rule`` applied to the values read for the
    ``sources`` (variable names, in any settings class); ``words`` says it on the page."""

    sources: tuple[str, ...]
    rule: Callable[..., Any]
    words: str


def follows(variable: str) -> Derived:
    """Unset, the setting takes the value read for ``variable`` (``JOB_DEMO_HANDLERS`` and
    ``ENABLE_DEBUG_TOOLBAR`` follow ``DEBUG``)."""
    return Derived((variable,), lambda value: value, f"follows `{variable}`")


def when_set(variable: str) -> Derived:
    """Unset, the setting is true when ``variable`` is set (``DATABASE_POOLED``)."""
    return Derived((variable,), lambda value: value is not None, f"true when `{variable}` is set")


def env(
    name: str,
    parser: Callable[..., Any],
    *,
    doc: str,
    derived: Derived | None = None,
    shown: bool = True,
    option: bool = False,
    flag: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A field's metadata: read ``name`` with ``parser(env, name, default, **options)``.

    ``doc``: what the setting does, in Markdown, written here and nowhere else.
    ``derived``: the default when unset, from other settings (:class:`Derived`).
    ``shown=False`` leaves the setting out of ``WorkerSettings.as_dict`` (``/api/config/``).
    ``option=True``: ``flask worker`` has an option that overrides it, its help the ``doc``
    (``cli.py`` generates the options); ``flag``: the option's name when it is not the
    field's (``--metrics-port`` for ``worker_metrics_port``).
    """
    if not doc.strip():
        raise ValueError(f"{name} needs a description")
    return {
        "env": name,
        "parser": parser,
        "options": options,
        "doc": doc,
        "derived": derived,
        "shown": shown,
        "option": option,
        "flag": flag,
    }


def field_default(spec: Field[Any]) -> Any:
    """The default written on the field."""
    if spec.default is not MISSING:
        return spec.default
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    raise TypeError(f"{spec.name} is read from {spec.metadata['env']} and needs a default")


def field_of(variable: str) -> Field[Any]:
    """The field, in any registered settings class, that reads ``variable``."""
    for cls in GROUPS:
        for spec in fields(cls):
            if spec.metadata.get("env") == variable:
                return spec
    raise LookupError(f"no setting reads {variable}")


def read_value(spec: Field[Any], source: Mapping[str, str]) -> Any:
    """The value of ``spec``'s variable in ``source``: parsed, or its default when unset (the
    derived one where it has one, itself read from ``source``)."""
    meta = spec.metadata
    derived: Derived | None = meta["derived"]
    if derived is None:
        default = field_default(spec)
    else:
        default = derived.rule(*(read_value(field_of(name), source) for name in derived.sources))
    return meta["parser"](source, meta["env"], default, **meta["options"])


def values_from_env(cls: type[Any], source: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments of ``cls`` read from ``source``, each field by its metadata."""
    return {spec.name: read_value(spec, source) for spec in fields(cls) if "env" in spec.metadata}


def plain(markdown: str) -> str:
    """A description as plain text: code spans without their backticks."""
    return re.sub(r"`([^`]*)`", r"\1", markdown)


def help_of(spec: Field[Any]) -> str:
    """The help of a field's ``flask worker`` option: its description and its variable."""
    return f"{plain(spec.metadata['doc'])} [{spec.metadata['env']}]"
