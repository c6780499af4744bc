"""What both clients share: an httpx client on a Unix socket or over TLS,
capped bodies, and the failures mapped as the C clients map them
(docs/remote.md, "Errors")."""

import asyncio
import errno as errno_mod
import http.cookiejar
import os
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable
from typing import Any, NoReturn, Self, TypeVar

import h11
import httpx

from . import wire
from .errors import (
    AirlockError,
    ConfigurationError,
    DecodeError,
    ExecutionUnavailable,
    SandboxEscapeSuspected,
    ToolValidationError,
)
from .types import SecretValue

T = TypeVar("T")
ERROR_BODY_MAX = 64 * 1024
# An answer that is a handful of members (a health, a lease, a handle, a
# reference, a metadata with a 16 KiB name twice): 1 MiB is many times any
# honest one, and what a hostile body of that size decodes into stays small
# (a 64 MiB body of "[]," decodes into 21 million lists, 1.5 GiB).
SMALL_MAX = 1 << 20
# What a transfer can fail with below HTTP: httpx's own errors, and what
# escapes them (a certificate that does not verify is ssl's own error).
TRANSPORT_ERRORS = (httpx.HTTPError, OSError)
_KEEP = "_airlock_keep"


def keep(e: BaseException) -> BaseException:
    """Mark an OSError raised on purpose (an answer's errno, a callback's
    own) so the transfer's handler lets it through unchanged."""
    setattr(e, _KEEP, True)
    return e


def transport_failure(t: "Transport", what: str, e: BaseException) -> BaseException:
    return e if getattr(e, _KEEP, False) else t.unavailable(what, e)

# The errnos the service sends by name on the workspace verbs (422).
_ERRNOS = {
    name: getattr(errno_mod, name)
    for name in (
        "ENOENT", "ENOTDIR", "EISDIR", "EEXIST", "ENOTEMPTY", "ENOSPC", "EDQUOT", "EFBIG", "ELOOP",
        "ENAMETOOLONG", "EACCES", "EPERM", "EROFS", "EINVAL", "EMLINK", "ETXTBSY", "EBUSY",
    )
}


def seal(credential: str | bytes | SecretValue | None) -> SecretValue | None:
    """The credential as a SecretValue: each adapter's constructor rebinds
    its argument to this first, so none of this package's frames holds the
    plain value where a traceback capturing locals would show it."""
    if credential is None or isinstance(credential, SecretValue):
        return credential
    if isinstance(credential, (str, bytes, bytearray, memoryview)):
        return SecretValue(credential if isinstance(credential, str) else bytes(credential))
    raise ConfigurationError(f"the credential must be str, bytes or SecretValue, not {type(credential).__name__}")


def credential_bytes(credential: str | bytes | SecretValue) -> bytes:
    raw = credential.reveal() if isinstance(credential, SecretValue) else (
        credential.encode() if isinstance(credential, str) else bytes(credential))
    raw = raw.strip()
    # It goes into a header line: visible ASCII only (the C client's rule).
    if not 1 <= len(raw) <= 4096 or any(c < 0x21 or c > 0x7E for c in raw):
        # Out of the frame before the exception holds it.
        del raw, credential
        raise ConfigurationError("the credential must be 1 to 4096 visible ASCII bytes")
    return raw


_HOST = re.compile(r"[A-Za-z0-9.\-\[\]:]+\Z", re.ASCII)
_PORT = re.compile(r"[0-9]{1,5}\Z", re.ASCII)


def check_address(address: str) -> None:
    """``unix:/absolute/path`` or ``HOST:PORT``, refused as the C client
    refuses it (src/remote/http.c): a host of letters, digits, ``.``,
    ``-`` and a bracketed IPv6 address, a port 1..65535. Anything a URL
    could read as more (a user, a path, a query, a scheme) is refused
    before it reaches httpx, and an address holding '@' (a token pasted as
    ``tok@host:port``, which httpx would send as Basic credentials) is
    refused without being echoed."""
    if not isinstance(address, str):
        raise ConfigurationError("address: must be a string, unix:/path or HOST:PORT")
    if address.startswith("unix:"):
        if not address[5:].startswith("/") or "\0" in address:
            raise ConfigurationError(f"{address}: a unix: address takes an absolute path (unix:/path)")
        return
    if "@" in address:
        raise ConfigurationError(
            "address: holds '@': an address is unix:/path or HOST:PORT, and the credential is passed as "
            "the credential, never in the address")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not _HOST.match(host) or not _PORT.match(port) or not 1 <= int(port) <= 65535:
        raise ConfigurationError(f"{address!r}: an address is unix:/path or HOST:PORT (a port 1..65535)")


def wipe(buf: bytearray) -> None:
    """Zero ``buf`` in place (a view of it may still exist, so its length
    cannot change)."""
    buf[0:len(buf)] = bytes(len(buf))


def _auth_header(secret: SecretValue) -> httpx.Headers:
    raw = secret.reveal()
    return httpx.Headers({b"Authorization": b"Bearer " + raw} if raw else None)


def _tls_context(address: str, ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext:
    """The client's TLS context; a file that cannot be read is
    ConfigurationError naming the setting and the file."""
    setting, path = "tls_ca_file", ca
    try:
        ctx = ssl.create_default_context(cafile=ca)
        if cert or key:
            if not (cert and key):
                raise ConfigurationError(f"{address}: a client certificate needs both tls_cert_file and tls_key_file")
            setting, path = "tls_cert_file and tls_key_file", f"{cert}, {key}"
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise ConfigurationError(f"{address}: {setting} {path!r}: {e.strerror or e}") from None
    return ctx


def read_credential_file(path: str | os.PathLike[str]) -> SecretValue:
    with open(path, "rb") as f:
        return SecretValue(f.read(4097).strip())


class _UnixConnection:
    """One HTTP/1.1 connection on a Unix socket: h11 (httpx's own parser)
    over the event loop's socket calls.

    Not httpx's default transport on a Unix socket: Debian 12's
    python3-anyio 3.6.2 sends the buffer's start again after a partial
    write on a Unix socket (UNIXSocketStream.send passes ``item`` where it
    means ``view``), so any body larger than the socket's buffer reached
    the server corrupted (measured: a 3 MiB upload arrived as 3,193,216
    bytes). And its pool's locks and tasks cost a call about 0.4 ms, more
    than the service's own work for a short command."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=64 * 1024)

    def reusable(self) -> bool:
        # An idle connection the server closed (its keep-alive ended) reads
        # EOF, and one with bytes waiting holds what no request asked for:
        # neither is reused. A peek, not select(): select() refuses a
        # descriptor past FD_SETSIZE (1024), which a busy process reaches.
        if self.h11.our_state is not h11.IDLE or self.h11.their_state is not h11.IDLE:
            return False
        # Bytes past the last answer already read (after a 204, or past a
        # Content-Length) would be taken as the next request's answer.
        if self.h11.trailing_data[0]:
            return False
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        return False

    async def send(self, data: bytearray, timeout: float | None) -> None:
        """Send ``data``, then zero it in place: a request's bytes hold the
        credential, and every frame that saw them (this one, the event
        loop's sendall, the caller's) holds this one buffer, so a traceback
        capturing locals shows zeros."""
        error: Exception | None = None
        try:
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except TimeoutError:
            error = httpx.WriteTimeout("write timed out")
        except (BrokenPipeError, ConnectionResetError):
            # The server answered before it read the whole body (401, 413)
            # and closed: its answer is waiting to be read, and the read
            # that follows fails if none came.
            pass
        except OSError as e:
            error = httpx.WriteError(str(e))
        finally:
            wipe(data)
        if error is not None:
            raise error

    async def event(self, timeout: float | None) -> Any:
        while True:
            try:
                ev = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                raise httpx.RemoteProtocolError(str(e)) from None
            if ev is not h11.NEED_DATA:
                return ev
            try:
                async with asyncio.timeout(timeout):
                    data = await asyncio.get_running_loop().sock_recv(self.sock, 256 * 1024)
            except TimeoutError:
                raise httpx.ReadTimeout("read timed out") from None
            except OSError as e:
                raise httpx.ReadError(str(e)) from None
            self.h11.receive_data(data)

    def close(self) -> None:
        self.sock.close()


class _UnixBody(httpx.AsyncByteStream):
    def __init__(self, pool: "_UnixTransport", conn: _UnixConnection, timeout: float | None) -> None:
        self._pool = pool
        self._conn: _UnixConnection | None = conn
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        while True:
            ev = await conn.event(self._timeout)
            if isinstance(ev, h11.Data):
                yield bytes(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                self._conn = None
                self._pool.release(conn)
                return
            elif isinstance(ev, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("the server closed the connection inside a body")

    async def aclose(self) -> None:
        # A body not read to its end: its connection cannot carry another.
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _UnixTransport(httpx.AsyncBaseTransport):
    """httpx's transport for ``unix:`` addresses (_UnixConnection says
    why): keep-alive connections, at most ``max_idle`` kept."""

    def __init__(self, path: str, max_idle: int = 8) -> None:
        self._path = path
        self._idle: list[_UnixConnection] = []
        self._max_idle = max_idle

    def release(self, conn: _UnixConnection) -> None:
        try:
            conn.h11.start_next_cycle()
        except h11.LocalProtocolError:
            conn.close()
            return
        if len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self, timeout: float | None) -> _UnixConnection:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_connect(sock, self._path)
        except TimeoutError:
            sock.close()
            raise httpx.ConnectTimeout("connect timed out") from None
        except OSError as e:
            sock.close()
            raise httpx.ConnectError(str(e)) from None
        except BaseException:
            sock.close()
            raise
        return _UnixConnection(sock)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t = request.extensions.get("timeout", {})
        conn = await self._connect(t.get("connect"))
        # The request's head (its Authorization line) is only ever in this
        # buffer, which conn.send zeroes once sent and the failure path
        # here zeroes too (conn.send says why).
        buf = bytearray()
        try:
            buf += conn.h11.send(h11.Request(method=request.method, target=request.url.raw_path,
                                             headers=request.headers.raw)) or b""
            assert isinstance(request.stream, httpx.AsyncByteStream)
            async for chunk in request.stream:
                if len(buf) >= 64 * 1024:
                    await conn.send(buf, t.get("write"))
                    buf = bytearray()
                buf += conn.h11.send(h11.Data(data=chunk)) or b""
            buf += conn.h11.send(h11.EndOfMessage()) or b""
            await conn.send(buf, t.get("write"))
            ev = await conn.event(t.get("read"))
            while isinstance(ev, h11.InformationalResponse):
                ev = await conn.event(t.get("read"))
            if not isinstance(ev, h11.Response):
                raise httpx.RemoteProtocolError("the server closed the connection without an answer")
        except h11.LocalProtocolError as e:
            wipe(buf)
            conn.close()
            # h11's message can quote a header's value: not carried.
            raise httpx.LocalProtocolError(f"a request h11 refuses to send ({type(e).__name__})") from None
        except BaseException:
            wipe(buf)
            conn.close()
            raise
        return httpx.Response(ev.status_code, headers=ev.headers, stream=_UnixBody(self, conn, t.get("read")),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": ev.reason})

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()


class _NoCookies(http.cookiejar.CookieJar):
    """Neither API sets a cookie, and none is ever sent: reading each
    answer's headers for one cost a call about 0.1 ms."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


class Transport:
    """One httpx.AsyncClient for one address: ``unix:/path`` (plain HTTP on
    the socket) or ``HOST:PORT`` (always TLS, peer and host verified)."""

    def __init__(
        self,
        address: str,
        credential: str | bytes | SecretValue | None,
        *,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.address = address  # first: repr works on a failed construction
        check_address(address)
        timeout = httpx.Timeout(120.0, connect=connect_timeout)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=8)
        # Everything that can fail comes before the credential is read: a
        # traceback that captures its frames' locals (an error reporter's
        # default) then finds no plain credential in any of this package's
        # frames.
        if address.startswith("unix:"):
            transport: httpx.AsyncBaseTransport = _UnixTransport(address[5:])
            base = "http://airlock"
        else:
            host, _, port = address.rpartition(":")
            transport = httpx.AsyncHTTPTransport(
                verify=_tls_context(address, tls_ca_file, tls_cert_file, tls_key_file), limits=limits, retries=0)
            base = f"https://{host}:{port}"
        self.base = base
        # Kept to be cut out of what a server says (raise_for), as a
        # SecretValue so no frame's locals show it: a proxy or a server that
        # echoes the request's headers into its error would otherwise put
        # the credential into an exception's message.
        self.secret = SecretValue(b"") if credential is None else SecretValue(credential_bytes(credential))
        # trust_env off: no proxy, netrc or certificate path from the
        # environment changes where the credential goes or what verifies
        # the peer (a netrc entry would even be sent in dev mode, where no
        # Authorization header keeps it out). The credential lives in the
        # one header (httpx's Headers leaves it out of its repr) and is
        # never formatted into a message (messages name the address).
        self.client = httpx.AsyncClient(
            transport=transport, base_url=base, headers=_auth_header(self.secret), timeout=timeout,
            follow_redirects=False, cookies=httpx.Cookies(_NoCookies()), trust_env=False,
        )

    def __repr__(self) -> str:
        return f"Transport({self.address!r})"

    async def aclose(self) -> None:
        await self.client.aclose()

    def unavailable(self, what: str, e: BaseException) -> ExecutionUnavailable:
        return ExecutionUnavailable(f"{self.address}: {what}: {type(e).__name__}: {e}")


async def read_capped(r: httpx.Response, cap: int, what: str) -> bytes:
    n = r.headers.get("content-length")
    if n is not None and n.isdigit() and int(n) > cap:
        raise ExecutionUnavailable(f"{what}: the answer is {n} bytes, over the {cap} byte cap")
    buf = bytearray()
    async for chunk in r.aiter_raw():
        buf += chunk
        if len(buf) > cap:
            raise ExecutionUnavailable(f"{what}: the answer is over the {cap} byte cap")
    return bytes(buf)


async def deadline(aw: Awaitable[T], seconds: float) -> T:
    """``aw`` within ``seconds`` of the whole, or TimeoutError. In a task
    of its own (asyncio.wait_for), not an asyncio.timeout() scope on the
    caller's task: under httpx's TLS transport, Debian 12's anyio 3.6
    requests a second cancellation of the task it runs in, so the scope's
    count no longer matches and a raw CancelledError escaped instead of the
    TimeoutError (measured: every slow TLS answer), leaving the caller's
    task counted as cancelling. The task keeps that inside itself."""
    return await asyncio.wait_for(aw, seconds)


def _redact(text: str, secret: SecretValue | None) -> str:
    """``text`` (a server's words) with the credential cut out."""
    token = b"" if secret is None else secret.reveal()
    if len(token) >= 4 and token.decode("ascii") in text:
        text = text.replace(token.decode("ascii"), "<credential>")
    return text


def raise_for(address: str, status: int, body: bytes, what: str, secret: SecretValue | None = None) -> NoReturn:
    """The failure an answer that is not a success stands for. A message
    the server wrote is carried with the credential cut out of it."""
    where = f"{address}: {what}"
    if status == 401:
        raise ConfigurationError(f"{where}: the service refused the credential (401)")
    try:
        o: Any = wire.load(body, ERROR_BODY_MAX)
    except DecodeError:
        o = None
    if status == 422 and isinstance(o, dict) and o.get("error") == "SystemError" and isinstance(o.get("errno"), str):
        code = _ERRNOS.get(o["errno"], errno_mod.EIO)
        raise keep(OSError(code, f"{where}: {_redact(str(o.get('message', '')), secret)}"))
    if isinstance(o, dict) and set(o) <= {"error", "message", "errno"}:
        o = {k: o[k] for k in ("error", "message") if k in o}
        try:
            e = wire.error_from_value(o)
        except DecodeError:
            e = None
        if e is not None:
            message = f"{where}: {_redact(e.message, secret)}"
            # An escape is an alert whatever the status it came with: a
            # 502/503/504 around it (a proxy, a server shutting down) must
            # not turn it into the one retriable class.
            if isinstance(e, SandboxEscapeSuspected) or status not in (502, 503, 504):
                raise type(e)(message)
            raise ExecutionUnavailable(message)
    if status in (502, 503, 504):
        raise ExecutionUnavailable(f"{where}: {status}")
    if status in (413, 414, 431):
        # The request itself is too large for the server (a body, a URL, a
        # head): sending it again cannot succeed, so not the retriable class.
        raise ToolValidationError(f"{where}: the request is too large for the server (HTTP {status})")
    raise ExecutionUnavailable(f"{where}: an answer that does not decode (status {status})")


class Client:
    """What both adapters are: one transport for one address, closed by
    ``aclose`` or by leaving ``async with``, and one request shape (an
    answer read whole under a cap, a failure raised as it maps)."""

    def __init__(
        self,
        address: str,
        credential: str | bytes | SecretValue | None,
        *,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ) -> None:
        # Set first: repr works on a client whose construction failed
        # (a traceback capturing locals repr's it).
        self.address = address
        self._t = Transport(
            address, credential, tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file, tls_key_file=tls_key_file
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection this client opened."""
        await self._t.aclose()

    async def _request(
        self,
        method: str,
        url: str,
        what: str,
        *,
        headers: dict[str, str] | None = None,
        content: Any = None,
        timeout: float,
        cap: int,
        expect: int | tuple[int, ...] = (200, 201, 204),
        total: float | None = None,
    ) -> tuple[int, bytes]:
        """One request; the status and the whole answer (at most ``cap``
        bytes), or the failure it maps to. ``timeout`` bounds each step
        (connecting, each read, each write) and ``total`` (``timeout`` when
        None) the whole exchange, so a server that sends a byte now and
        then cannot hold the call past it. A success status other than
        ``expect`` is a server this client does not know: refused."""
        limit = timeout if total is None else total
        try:
            status, data = await deadline(self._exchange(method, url, what, headers, content, timeout, cap), limit)
        except TimeoutError:
            raise ExecutionUnavailable(f"{self.address}: {what}: no whole answer within {limit:g} s") from None
        if status >= 300:
            raise_for(self.address, status, data, what, self._t.secret)
        wanted = (expect,) if isinstance(expect, int) else expect
        if status not in wanted:
            raise ExecutionUnavailable(
                f"{self.address}: {what}: answered HTTP {status} where {' or '.join(map(str, wanted))} "
                "was expected")
        return status, data

    async def _exchange(
        self, method: str, url: str, what: str, headers: dict[str, str] | None, content: Any, timeout: float,
        cap: int,
    ) -> tuple[int, bytes]:
        try:
            req = self._t.client.build_request(method, url, content=content, headers=headers, timeout=timeout)
            r = await self._t.client.send(req, stream=True)
            try:
                data = await read_capped(r, cap if r.status_code < 300 else ERROR_BODY_MAX, f"{self.address}: {what}")
            finally:
                await r.aclose()
        except TRANSPORT_ERRORS as e:
            raise transport_failure(self._t, what, e) from None
        return r.status_code, data

    def _decode(self, data: bytes, what: str, allow_nul: bool = False) -> Any:
        try:
            return wire.load(data, allow_nul=allow_nul)
        except DecodeError as e:
            raise ExecutionUnavailable(f"{self.address}: {what}: an answer that does not decode: {e.message}") from None
