"""Helpers shared by the transceiver's black-box service tests (test_signaling.py,
test_registry.py): loopback ports and deadline-bounded waits. Standard library only."""

import socket
import time


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what):
    """Polls predicate() until it returns something truthy (returned) or `timeout` seconds
    pass (AssertionError naming `what`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
