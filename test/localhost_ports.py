"""Loopback ports for the servers a test or benchmark starts (the live view's page and its
Foxglove server): a free one to hand out, and whether one is listening yet."""
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port`` (0.5 s timeout)."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
