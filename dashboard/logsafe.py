"""Log lines that values cannot forge: control characters in a message are escaped.

A job's error text, a user name typed at sign-in, a header: anything a message interpolates
may hold a newline followed by something that looks like a log line of its own. The
:class:`SafeFormatter` escapes the message's control characters (``\\n`` becomes the two
characters ``\\`` ``n``; others ``\\xNN`` or ``\\uNNNN``), so one record is always one line
(tracebacks, appended after the message, keep their lines).
"""

from __future__ import annotations

import logging
import re

_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")  # all but the tab
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: str) -> str:
    """``text`` with every control character but the tab escaped."""
    return _CONTROL.sub(_escape, text)


class SafeFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose ``%(message)s`` has its control characters escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_control(record.message)
        return super().formatMessage(record)
