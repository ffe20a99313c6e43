"""The meters endpoint's server (httpd.Server) against a pipelined flood: one local client that
writes 2,000 `GET /metrics` in one write and reads nothing once made the one thread answer every
request in one read in one pass (a snapshot each, the output buffer copied at each answer:
quadratic), so a second client -- Prometheus -- waited seconds, and the answers piled up in the
server's memory. Now requests are answered one at a time per connection, a read brings at most
MAX_PIPELINE of them, and each connection gets a bounded turn.

The scrape under attack is compared with a reference scrape made alternately in the same test
with no attacker: a ratio, never a wall-clock bound (the machine is shared)."""
from __future__ import annotations

import http.client
import socket
import statistics
import threading
import time

import pytest

from corecast.meters import httpd

BODY = "".join(f'corecast_test_ratio{{scope="cpu{i}",level="cpu",stat="avg"}} {i * 0.5!r}\n'
               for i in range(100)).encode()            # about 5 KB, as a small board's /metrics
COST_S = 0.001                                          # what a snapshot of the board costs the thread


class _Metrics:
    """An answer like the exporter's: each /metrics costs the server's thread COST_S (a
    sleep: it holds the one thread, not the GIL the test's clients need too), and is counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path: str) -> httpd.Answer:
        self.calls += 1
        time.sleep(COST_S)
        return 200, "text/plain; version=0.0.4; charset=utf-8", BODY


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(httpd, "IDLE_S", 5.0)
    answer = _Metrics()
    srv = httpd.Server("127.0.0.1", 0, answer, name="corecast-meters")
    srv.start()
    yield srv, answer
    srv.stop()


def _request(port: int) -> bytes:
    return f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def _conn_of(srv: httpd.Server, client: socket.socket):
    """The server's connection object for `client` (None once closed), read from another thread."""
    for _ in range(100):
        try:
            conns = list(srv.conns.values())
            break
        except RuntimeError:                                # the dict changed while copied
            time.sleep(0.001)
    else:
        return None
    me = client.getsockname()
    for c in conns:
        try:
            if c.sock.getpeername() == me:
                return c
        except OSError:
            pass
    return None


def _attack(port: int) -> tuple[socket.socket, int]:
    """A client that writes 2,000 pipelined requests in one write and never reads; its receive
    buffer small, as a client that reads nothing has in effect."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    try:
        sent = s.send(_request(port) * 2000)
    except BlockingIOError:
        sent = 0
    return s, sent


class _Watch:
    """Samples, while running, the most the server holds for the attacking connection."""

    def __init__(self, srv: httpd.Server, client: socket.socket):
        self.srv, self.client = srv, client
        self.max_out = self.max_in = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            c = _conn_of(self.srv, self.client)
            if c is not None:
                self.max_out = max(self.max_out, len(c.out))
                self.max_in = max(self.max_in, len(c.inbuf))
            time.sleep(0.002)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)


def _scrape(scraper: http.client.HTTPConnection) -> float:
    """One keep-alive scrape, as Prometheus makes it; its latency in seconds."""
    t = time.perf_counter()
    scraper.request("GET", "/metrics")
    r = scraper.getresponse()
    body = r.read()
    took = time.perf_counter() - t
    assert r.status == 200 and body == BODY
    return took


def _gone(srv: httpd.Server, client: socket.socket) -> None:
    """Close the attacker and wait until the server has let its connection go."""
    name = client.getsockname()
    client.close()
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            peers = []
            for c in list(srv.conns.values()):
                try:
                    peers.append(c.sock.getpeername())
                except OSError:
                    pass
        except RuntimeError:
            continue
        if name not in peers:
            return
        time.sleep(0.01)
    raise AssertionError("the server still holds the closed attacker's connection")


def _rounds(srv: httpd.Server, answer: _Metrics, rounds: int = 5):
    """Alternately a reference scrape (no attacker) and a scrape while an attacker floods; the
    medians, the attackers' answers counted, and the most the server held for an attacker."""
    scraper = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    ref, attacked, answered, max_out, max_in = [], [], [], 0, 0
    try:
        _scrape(scraper)                                   # connected, warm
        for _ in range(rounds):
            ref.append(_scrape(scraper))
            before = answer.calls
            attacker, sent = _attack(srv.port)
            assert sent > 3 * httpd.RECV_SIZE, sent          # the flood is in the server's socket
            watch = _Watch(srv, attacker)
            time.sleep(0.02)                               # the server has begun on the flood
            attacked.append(_scrape(scraper))
            time.sleep(0.1)                                # what the flood does in the meantime
            watch.stop()
            answered.append(answer.calls - before - 1)
            max_out, max_in = max(max_out, watch.max_out), max(max_in, watch.max_in)
            _gone(srv, attacker)
    finally:
        scraper.close()
    return statistics.median(ref), statistics.median(attacked), answered, max_out, max_in


def _check(srv, answer, most_answered: int) -> None:
    ref, attacked, answered, max_out, max_in = _rounds(srv, answer)
    one_answer = len(BODY) + 200
    # the scrape waits for a few of the attacker's answers (one turn), never for its flood: with
    # the flood answered in one pass it waited more than a thousand times its reference
    assert attacked / ref < 20, (attacked, ref)
    # the server holds at most one answer for the attacker, and bounded input
    assert max_out <= one_answer, max_out
    assert max_in <= httpd.RECV_SIZE + httpd.MAX_HEAD, max_in
    # and answered it no more than its socket buffers take, not the 2,000 it asked
    assert max(answered) <= most_answered, answered


def test_a_pipelined_flood_is_refused_and_a_scrape_is_answered_meanwhile(server):
    """More than MAX_PIPELINE requests in one read: 400 and closed, no snapshot taken for them."""
    srv, answer = server
    _check(srv, answer, most_answered=0)
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(_request(srv.port) * (httpd.MAX_PIPELINE + 1))
    s.settimeout(10)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:                          # closed with requests left unread
        pass
    s.close()
    assert data.startswith(b"HTTP/1.1 400 Bad Request") and b"too many pipelined requests" in data, data[:200]


def test_a_flood_under_the_pipeline_cap_is_answered_one_at_a_time_and_in_turns(server, monkeypatch):
    """With the cap out of the way (a flood of reads under it works the same), the attacker's
    requests are answered one at a time, only as its socket takes the answers, in turns of
    PER_TURN: a scrape meanwhile waits for a turn, and the server holds one answer for it."""
    monkeypatch.setattr(httpd, "MAX_PIPELINE", 10**9)
    srv, answer = server
    # what loopback's buffers take of answers nobody reads: far less than the 2,000 asked
    _check(srv, answer, most_answered=1000)


def test_pipelined_requests_under_the_cap_are_all_answered_in_order(server):
    """A client that pipelines (within MAX_PIPELINE) and reads gets every answer, in order."""
    srv, answer = server
    n = httpd.MAX_PIPELINE
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(_request(srv.port) * (n - 1) + _request(srv.port).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    s.settimeout(10)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    assert data.count(b"HTTP/1.1 200 OK") == n and data.count(BODY) == n and answer.calls == n
    assert data.endswith(BODY) and b"Connection: close" in data.rsplit(b"HTTP/1.1", 1)[1]
