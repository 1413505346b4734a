"""Settings for apps built with ``DEBUG=false`` by tests that are not about access control:
production mode refuses to start without a real secret key and a credential, so these turn
sign-in off on purpose (the access tests build their own apps with users and tokens)."""

OPEN_ACCESS = {
    "AUTH_DISABLED": "true",
    "SECRET_KEY": "test-only-secret-key-0123456789abcdef0123456789",
    "JOB_DEMO_HANDLERS": "true",  # off by default with DEBUG=false; these tests create demo jobs
}

# The audit fields an API write records while sign-in is off.
ANONYMOUS_API = {"source": "api", "actor": "anonymous", "role": None, "credential": "none"}


def audit(data: dict) -> dict:
    """An event's data without the request id that every request adds."""
    return {key: value for key, value in data.items() if key != "request_id"}
