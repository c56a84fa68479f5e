"""HTTP requests whose whole duration is bounded, however the reply trickles in, with one thread for all.

An HTTP client's timeout bounds each read of the socket, so a server that sends a byte a second holds a
call for as long as it likes. `fetch` bounds the whole call: a single watchdog thread looks at every call
in flight four times a second, says on stderr when one has taken longer than `slow` seconds, and once
one passes its deadline shuts its socket, which ends the blocked read; the call then raises
TimeoutError. A thread per call (as `base.within` starts) would do the same, at the cost of a thread
started per call, which is what a run with a thousand calls in flight cannot afford.
"""

import contextlib
import http.client
import itertools
import socket
import threading
import time
import urllib.request

TICK = 0.25  # seconds between the watchdog's looks


class _Call:
    """One request in flight: its deadline, its slow-warning time, and its socket once connected."""

    def __init__(self, deadline: float, slow_at: float | None, on_slow) -> None:
        self.deadline, self.slow_at, self.on_slow = deadline, slow_at, on_slow
        self.sock: socket.socket | None = None
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)  # a read blocked on it returns at once


class _Watchdog:
    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, call: _Call) -> int:
        key = next(self._ids)
        with self._lock:
            self._calls[key] = call
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True, name="rawreact-watchdog")
                self._thread.start()
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._calls.pop(key, None)

    def _watch(self) -> None:
        while True:
            time.sleep(TICK)
            now = time.monotonic()
            with self._lock:
                calls = list(self._calls.values())
            for call in calls:
                if call.slow_at is not None and now >= call.slow_at:
                    call.slow_at = None
                    call.on_slow()
                if not call.expired and now >= call.deadline:
                    call.expire()


_WATCHDOG = _Watchdog()
_CURRENT = threading.local()  # the call this thread is making, for the connection to register its socket


class _Registered:
    """A connection that hands its socket to the call this thread is making, once connected."""

    def connect(self) -> None:
        super().connect()
        call = getattr(_CURRENT, "call", None)
        if call is not None:
            call.sock = self.sock
            if call.expired:
                call.expire()


class _Connection(_Registered, http.client.HTTPConnection):
    pass


class _SecureConnection(_Registered, http.client.HTTPSConnection):
    pass


class _Handler(urllib.request.HTTPHandler):
    def http_open(self, request):
        return self.do_open(_Connection, request)


class _SecureHandler(urllib.request.HTTPSHandler):
    def https_open(self, request):
        return self.do_open(_SecureConnection, request, context=self._context)


_OPENER = urllib.request.build_opener(_Handler, _SecureHandler)  # proxies and redirects as urlopen's


def fetch(request: urllib.request.Request, timeout: float, slow: float | None = None, on_slow=None) -> bytes:
    """The body of the reply to `request`, within `timeout` seconds in all (TimeoutError otherwise); after
    `slow` seconds `on_slow()` is called once. HTTP errors are raised as urlopen raises them."""
    start = time.monotonic()
    call = _Call(start + timeout, None if slow is None or on_slow is None else start + slow, on_slow)
    key = _WATCHDOG.add(call)
    _CURRENT.call = call
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            body = response.read()
        if call.expired:  # a reply without a length ends where the socket was shut: it is cut, not whole
            raise TimeoutError(f"no answer within {timeout:g} s")
        return body
    except (OSError, http.client.HTTPException):
        if call.expired:
            raise TimeoutError(f"no answer within {timeout:g} s") from None
        raise
    finally:
        _CURRENT.call = None
        _WATCHDOG.remove(key)
