"""The settings: every environment variable read once, its default and its one description
written once, on its field.

- :mod:`.settings`: :class:`Settings` (database, web, access), :func:`settings_of`;
- :mod:`.worker`: :class:`WorkerSettings` (``Settings.worker``, the ``flask worker`` options);
- :mod:`.ops`: :class:`OpsSettings` (``Settings.ops``: logs, metrics, retention, connections);
- :mod:`.fields`: how a field declares its setting (:func:`env`), derives its default from
  others' (:class:`Derived`) and is read (:func:`values_from_env`);
- :mod:`.parsers`: how a variable's text is read, :class:`ConfigError` naming it when malformed;
- :mod:`.secret_key`: what a production ``SECRET_KEY`` must be;
- :mod:`.rules`: the value rules every door and the store hold input to (lengths, ranges,
  patterns, JSON depth, page sizes), fixed in the code and not settable.

The documentation's configuration page (``python -m scripts.docs``) and the help of the
``flask worker`` options (``cli.py``) are generated from the fields.
"""

from .fields import Derived, env, follows, help_of, values_from_env, when_set
from .ops import OpsSettings
from .parsers import ConfigError, Entry, parse_days
from .secret_key import DEV_SECRET_KEY, secret_key_bits, secret_key_is_strong
from .settings import API_OFFSET_MAX, DEV_CORS_ORIGIN, PROJECT_ROOT, Settings, settings_of
from .worker import WorkerSettings

__all__ = [
    "API_OFFSET_MAX",
    "DEV_CORS_ORIGIN",
    "DEV_SECRET_KEY",
    "PROJECT_ROOT",
    "ConfigError",
    "Derived",
    "Entry",
    "OpsSettings",
    "Settings",
    "WorkerSettings",
    "env",
    "follows",
    "help_of",
    "parse_days",
    "secret_key_bits",
    "secret_key_is_strong",
    "settings_of",
    "values_from_env",
    "when_set",
]
