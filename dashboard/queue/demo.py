"""Built-in demo job types (issue 3 gives them their reference behaviour)."""
