"""A small read-only HTTP/1.1 server in one thread (a selector loop), for the meters endpoint,
and the Host rule every corecast listener follows (the dashboard's too).

Bounded whatever its clients do: one thread however many connections; at most
MAX_CONNECTIONS open (a new one beyond that closes the one idle longest, so a flood of idle
connections never locks Prometheus out); a connection idle for IDLE_S, or whose request head
passes MAX_HEAD bytes, is closed; only GET and HEAD are answered (anything else 405, and the
connection closed without reading a body). A request whose Host is not this server's is
answered 421 (`host_allowed`): a web page elsewhere cannot read the endpoint through DNS
rebinding.

Pipelined requests (HTTP/1.1) are answered in order, one at a time: the next is taken from a
connection's input only once the answer before it has gone to the kernel, and the input is
read again only once every request in it is answered -- so a client that sends thousands of
requests and reads nothing gets a few answers (as many as the socket buffers hold), never
thousands of snapshots, and never a growing output buffer: at most one answer is held per
connection, and RECV_SIZE + MAX_HEAD bytes of input. More than MAX_PIPELINE requests in the
input at once is answered 400 and the connection closed. Each ready connection gets one turn
per pass of the loop, of at most PER_TURN answers: one connection cannot keep the thread from
the others (Prometheus's scrape waits for a few answers at most, not for a flood's).
"""
from __future__ import annotations

import errno
import ipaddress
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from typing import Callable

MAX_CONNECTIONS = 64
IDLE_S = 10.0
MAX_HEAD = 8192
RECV_SIZE = 16384      # one read: with MAX_HEAD, the most input a connection holds
MAX_PIPELINE = 16      # requests one read may bring; more is a flood, not a client (none pipelines that deep)
PER_TURN = 4           # answers one connection gets per pass of the loop, before the others' turn

# (status, content type, body) for a path
Answer = tuple[int, str, bytes]
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           421: "Misdirected Request", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    ip = _ip(host)
    return bool(ip and ip.is_loopback)


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's (name, port); port None when absent; None when it is not a host."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    else:
        name, _, port = value.partition(":")
        port = port if _ else None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    return name.lower().rstrip("."), (int(port) if port is not None else None)


def host_allowed(host_header: str | None, listen_host: str, port: int, local_ip: str | None) -> bool:
    """Whether a request's Host names this server: the port it listens on, and the address it
    listens on -- on a loopback address also `localhost`, 127.0.0.1 and ::1; on every address
    (0.0.0.0, ::) the address the connection came in on; and this machine's host name. A
    request without a Host (HTTP/1.0) is not a browser's, and is answered."""
    if host_header is None:
        return True
    parsed = split_host(host_header)
    if parsed is None:
        return False
    name, p = parsed
    if (p if p is not None else 80) != port:
        return False
    names = {listen_host.lower().strip("[]"), socket.gethostname().lower()}
    listen_ip = _ip(listen_host)
    unspecified = listen_host in ("", "0.0.0.0", "::") or bool(listen_ip and listen_ip.is_unspecified)
    if unspecified and local_ip:
        names.add(local_ip.lower().split("%", 1)[0])
        if is_loopback(local_ip):
            names |= {"localhost", "127.0.0.1", "::1"}
    elif is_loopback(listen_host):
        names |= {"localhost", "127.0.0.1", "::1"}
    ip = _ip(name)
    if ip is not None:
        return any(_ip(n) == ip for n in names)
    return name in names


class Peer:
    """The other end of a connection, and (`uid()`) the local user whose socket it is."""

    def __init__(self, peer: tuple, local: tuple):
        self.peer, self.local = peer, local

    def uid(self) -> int | None:
        """The uid owning the connecting socket when it is one of this machine's (the kernel's
        socket table, /proc/net/tcp and tcp6: its local end is our peer and its remote end us,
        as identd finds it), None for a connection from elsewhere or one the table no longer
        holds. Read only when asked: the table grows with the machine's sockets."""
        if len(self.peer) < 2 or len(self.local) < 2:
            return None
        want_local, want_remote = _forms(*self.peer[:2]), _forms(*self.local[:2])
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table, "rb") as fh:
                    for n, line in enumerate(fh):
                        if n > MAX_SOCKET_LINES:
                            return None
                        f = line.split()
                        if n == 0 or len(f) < 8:
                            continue
                        if f[1].decode().upper() in want_local and f[2].decode().upper() in want_remote:
                            return int(f[7])
            except (OSError, ValueError):
                continue
        return None


#: the most lines of /proc/net/tcp{,6} read to find a peer (a machine with more sockets gets
#: "not a local user": the app slots of a restricted area stay hidden)
MAX_SOCKET_LINES = 1_000_000


def _forms(ip: str, port: int) -> set[str]:
    """The forms an address may have in the tables: as it is, and an IPv4-mapped IPv6 address
    (an IPv4 client of an IPv6 socket) also as the IPv4 one."""
    out = {_proc_addr(ip, port), _proc_addr(_unmapped(ip) or "", port)}
    return {a for a in out if a}


def _unmapped(ip: str) -> str | None:
    """The IPv4 address of an IPv4-mapped IPv6 one (::ffff:127.0.0.1), else None."""
    try:
        a = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return None
    m = getattr(a, "ipv4_mapped", None)
    return str(m) if m is not None else None


def _proc_addr(ip: str, port: int) -> str | None:
    """An address as the kernel's socket tables print it: the address's 32-bit words each in
    this machine's byte order, in hex, then the port."""
    try:
        raw = ipaddress.ip_address(ip.split("%", 1)[0]).packed
    except ValueError:
        return None
    words = struct.unpack(f"{'<' if sys.byteorder == 'little' else '>'}{len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


class _Conn:
    """One connection. `inbuf` and `out` are bytearrays: appending to them, and dropping what
    was parsed or sent from their front, costs what was added or dropped -- never a copy of the
    whole buffer per request (which made a pipelined flood quadratic)."""
    __slots__ = ("sock", "inbuf", "out", "last", "close_after", "peer", "local")

    def __init__(self, sock: socket.socket, peer: tuple = (), local: tuple = ()):
        self.sock, self.peer, self.local = sock, peer, local
        self.inbuf, self.out = bytearray(), bytearray()
        self.last = time.monotonic()
        self.close_after = False


class Server:
    """`answer(path) -> (status, content type, body)` for GET and HEAD, served on host:port.
    OSError from binding is the caller's to word."""

    def __init__(self, host: str, port: int, answer: Callable[..., Answer], name: str = "corecast-http",
                 allow: str = "GET, HEAD", with_peer: bool = False):
        """`with_peer`: `answer(path, peer)`, `peer` a `Peer` of the connection (whose local user
        it can look up), instead of `answer(path)`."""
        self.answer, self.name, self.allow, self.with_peer = answer, name, allow, with_peer
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(128)
        except BaseException:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.host, self.port = self.sock.getsockname()[:2]
        self.listen_host = host
        self.conns: dict[socket.socket, _Conn] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread.is_alive():
            self._thread.join(5.0)
        for c in list(self.conns.values()):
            c.sock.close()
        self.conns.clear()
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()

    def _loop(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.sel = sel
        try:
            while not self._stop:
                for key, events in sel.select(1.0):
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        return
                    else:
                        self._ready(key.data, events)
                now = time.monotonic()
                for c in [c for c in self.conns.values() if now - c.last > IDLE_S]:
                    self._close(c)
        finally:
            sel.close()

    def _accept(self) -> None:
        while True:
            try:
                s, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return                       # try again when a connection has closed
                raise
            if len(self.conns) >= MAX_CONNECTIONS:
                self._close(min(self.conns.values(), key=lambda c: c.last))
            s.setblocking(False)
            try:
                local = tuple(s.getsockname()[:2])
            except OSError:
                local = ()
            c = _Conn(s, tuple(addr[:2]), local)
            self.conns[s] = c
            self.sel.register(s, selectors.EVENT_READ, c)

    def _close(self, c: _Conn) -> None:
        self.conns.pop(c.sock, None)
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def _ready(self, c: _Conn, events: int) -> None:
        """The connection's turn: read (only when every request read before is answered and
        sent, so the input stays bounded and a flood waits in the client's socket, not in
        ours), then answer at most PER_TURN requests, each once the answer before it is sent."""
        c.last = time.monotonic()
        try:
            if events & selectors.EVENT_READ and not c.out and not self._pending(c):
                data = c.sock.recv(RECV_SIZE)
                if not data:
                    self._close(c)
                    return
                c.inbuf += data
                if c.inbuf.count(b"\r\n\r\n") > MAX_PIPELINE:
                    self._respond(c, 400, "text/plain; charset=utf-8", b"too many pipelined requests\n", close=True)
            for _ in range(PER_TURN):
                if c.out:
                    self._send(c)
                    if c.out:                  # the client has not read the last answer: wait for it
                        break
                if c.close_after or not self._request_next(c):
                    break
            if c.out:
                self._send(c)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(c)
            return
        if c.sock.fileno() < 0:
            return
        if not c.out and c.close_after:
            self._close(c)
            return
        # requests left over from this turn wait for the socket to take more (at once, unless
        # the client is not reading), after every other ready connection's turn
        want = selectors.EVENT_WRITE if c.out or (self._pending(c) and not c.close_after) else selectors.EVENT_READ
        self.sel.modify(c.sock, want, c)

    @staticmethod
    def _send(c: _Conn) -> None:
        n = c.sock.send(c.out)
        del c.out[:n]

    # ------------------------------------------------------------------ requests
    @staticmethod
    def _pending(c: _Conn) -> bool:
        """Whether the input holds something to answer: a whole request head, or one too large."""
        return b"\r\n\r\n" in c.inbuf or len(c.inbuf) > MAX_HEAD

    def _request_next(self, c: _Conn) -> bool:
        """Answer the first whole request head in the input (pipelining kept in order); False
        when there is none yet."""
        end = c.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(c.inbuf) > MAX_HEAD:
                self._respond(c, 431, "text/plain; charset=utf-8", b"request head too large\n", close=True)
                return True
            return False
        if end > MAX_HEAD:
            self._respond(c, 431, "text/plain; charset=utf-8", b"request head too large\n", close=True)
            return True
        head = c.inbuf[:end].decode("latin-1")
        del c.inbuf[:end + 4]
        self._request(c, head)
        return True

    def _request(self, c: _Conn, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._respond(c, 400, "text/plain; charset=utf-8", b"bad request\n", close=True)
            return
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            k, sep, v = line.partition(":")
            if not sep:
                self._respond(c, 400, "text/plain; charset=utf-8", b"bad request\n", close=True)
                return
            k = k.strip().lower()
            if k == "host" and k in headers:             # two Hosts: which one would be believed?
                self._respond(c, 400, "text/plain; charset=utf-8", b"two Host headers\n", close=True)
                return
            headers[k] = v.strip()
        conn_hdr = headers.get("connection", "").lower()
        close = conn_hdr == "close" or (version == "HTTP/1.0" and conn_hdr != "keep-alive")
        head_only = method == "HEAD"
        if not host_allowed(headers.get("host"), self.listen_host, self.port, c.local[0] if c.local else None):
            self._respond(c, 421, "text/plain; charset=utf-8",
                          f"this server answers for {self.listen_host}:{self.port} only\n".encode(), close=True,
                          head_only=head_only)
            return
        if method not in ("GET", "HEAD"):
            self._respond(c, 405, "text/plain; charset=utf-8", b"read-only: GET or HEAD\n", close=True)
            return
        try:
            path = target.split("?", 1)[0]
            status, ctype, body = (self.answer(path, Peer(c.peer, c.local)) if self.with_peer else self.answer(path))
        except Exception as err:              # a bug answers 500 in one line; the server goes on
            status, ctype = 500, "text/plain; charset=utf-8"
            body = f"internal error: {type(err).__name__}: {err}\n".encode()
        self._respond(c, status, ctype, body, close=close, head_only=head_only)

    def _respond(self, c: _Conn, status: int, ctype: str, body: bytes, close: bool = False,
                 head_only: bool = False) -> None:
        h = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}", f"Server: {self.name}",
             f"Content-Type: {ctype}", f"Content-Length: {len(body)}", "Cache-Control: no-store"]
        if status == 405:
            h.append(f"Allow: {self.allow}")
        if close:
            h.append("Connection: close")
        c.out += ("\r\n".join(h) + "\r\n\r\n").encode("latin-1")
        if not head_only:
            c.out += body
        c.close_after = c.close_after or close
