"""Both clients against a hostile server: a Unix-socket server written here
that answers what no airlock server would (huge, endless, slow, cut,
mislabelled, malformed bodies; redirects; answers for another artifact,
run or digest; messages echoing the credential), and careless callers
(ids that would rewrite a URL, mistyped arguments, addresses carrying a
token). Every answer must fail loudly with the class the docs name, send
nothing for a refused argument, leave no file half-written and no
descriptor open, and never show the credential."""

import asyncio
import copy
import dataclasses
import hashlib
import json
import logging
import os
import pickle
import resource
import shutil
import ssl
import subprocess
import tempfile
import traceback
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath
from typing import Any, TypeVar

import pytest

import airlock
from airlock import ServiceEnvironment, WorkerClient, service, wire, worker

T = TypeVar("T")
TOKEN = "tok-9f2c1e7d5b3a-secret-bearer"
AID = "0192d3f5-1234-7abc-8def-0123456789ab"
# A bound on each test's whole run, so a client that hangs fails the test
# instead of stalling the suite; no test asserts how long anything took.
HANG_S = 60.0


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[Request, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool | None]]


@dataclass
class Hostile:
    """A server on a Unix socket: each request goes to ``handler``, which
    writes what it likes; the connection is closed after it unless it
    returns True (kept alive for the next request)."""

    handler: Handler
    tls: tuple[str, str] | None = None  # (certificate, key): TCP and TLS on 127.0.0.1
    path: str = ""
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    _dir: str = ""
    _server: asyncio.AbstractServer | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}" if self.tls else "unix:" + self.path

    async def __aenter__(self) -> "Hostile":
        self._dir = tempfile.mkdtemp(prefix="airlock-hostile-")
        self.path = os.path.join(self._dir, "s.sock")
        if self.tls:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(*self.tls)
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ctx)
            self.port = self._server.sockets[0].getsockname()[1]
        else:
            self._server = await asyncio.start_unix_server(self._serve, self.path)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        if not self.tls:
            os.unlink(self.path)
        os.rmdir(self._dir)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                req = Request(method, target, headers, b"")
                self.requests.append(req)
                keep = await self.handler(req, reader, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)


async def body_of(req: Request, reader: asyncio.StreamReader) -> bytes:
    req.body = await reader.readexactly(int(req.headers.get("content-length", "0")))
    return req.body


def answer(status: int, body: bytes = b"", ctype: str = "application/json", extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            .encode() + body)


def canned(status: int, body: bytes = b"", ctype: str = "application/json", extra: str = "") -> Handler:
    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await body_of(req, reader)
        writer.write(answer(status, body, ctype, extra))
        await writer.drain()
        return True

    return h


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def run(main: Callable[[], Awaitable[T]]) -> T:
    """``main`` in a fresh loop, bounded; the process's descriptors must be
    what they were before (every connection closed, the server's too)."""
    async def bounded() -> T:
        async with asyncio.timeout(HANG_S):
            return await main()

    asyncio.run(asyncio.sleep(0))  # the loop's own first-use descriptors
    before = fds()
    out = asyncio.run(bounded())
    assert fds() == before
    return out


def serve(handler: Handler, body: Callable[[Hostile, WorkerClient], Awaitable[T]], token: str | None = TOKEN) -> T:
    async def main() -> T:
        async with Hostile(handler) as srv:
            async with WorkerClient(srv.address, token) as w:
                return await body(srv, w)

    return run(main)


def meta(sha: str, size: int, aid: str = AID) -> bytes:
    return json.dumps({
        "artifact_id": aid, "tenant_id": "t", "run_id": None, "origin": "UPLOAD", "filename": "f",
        "filename_base64": "Zg==", "media_type": "application/octet-stream", "size_bytes": size,
        "sha256": sha, "trust": "USER_SUPPLIED", "created_at": "2026-12-01T00:00:00.000Z",
        "expires_at": None,
    }).encode()


def artifact_server(data: bytes, *, declared: bytes | None = None, served: bytes | None = None,
                    meta_id: str = AID, content: Handler | None = None) -> Handler:
    """Metadata saying ``declared`` (default ``data``), content ``served``
    (default ``data``) with the metadata's ETag and its true length."""
    want = declared if declared is not None else data
    sha = hashlib.sha256(want).hexdigest()
    out = served if served is not None else data

    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await body_of(req, reader)
        if req.target.endswith("/content"):
            if content is not None:
                return bool(await content(req, reader, writer))
            writer.write(answer(200, out, "application/octet-stream", f'ETag: "sha256:{sha}"\r\n'))
        else:
            writer.write(answer(200, meta(sha, len(want), meta_id)))
        await writer.drain()
        return True

    return h


_NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
HANDLE = airlock.EnvironmentHandle("env_" + "0" * 32, airlock.TenantId("t"), airlock.RunId("r"), 1, _NOW,
                                   _NOW + timedelta(hours=1))


async def trickle_events(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A streamed execute sending a started event every 50 ms, forever (a
    cancel answered: none running)."""
    await body_of(req, reader)
    if req.target.endswith("/cancel"):
        writer.write(answer(200, b'{"cancelled": false}'))
        await writer.drain()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
    line = b'{"event": "started"}\n'
    for _ in range(100000):
        writer.write(b"%x\r\n%s\r\n" % (len(line), line))
        await writer.drain()
        await asyncio.sleep(0.05)


async def trickle_answer(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An answer of 100000 bytes, one every 50 ms: no read ever waits long."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100000):
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.05)


async def endless_chunked(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A chunked JSON answer that never ends."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"[]," * 20000
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()


def leftovers(d: str) -> list[str]:
    return sorted(os.listdir(d))


# ---- sizes: huge, endless, a million values ------------------------------------------


def test_a_huge_declared_body_is_refused_before_it_is_read() -> None:
    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(HANG_S)

    async def body(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable, match="over the 1048576 byte cap"):
            await w.health()

    serve(h, body)


def test_an_endless_chunked_body_is_cut_at_the_cap() -> None:
    sent = [0]

    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"[]," * 20000
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent[0] += len(chunk)
            await writer.drain()

    async def body(srv: Hostile, w: WorkerClient) -> None:
        # A lease answer is a handful of members: the small cap, not 64 MiB.
        with pytest.raises(airlock.ExecutionUnavailable, match="over the 1048576 byte cap"):
            await w.claim("run-1", "t", 1, 30)

    serve(h, body)
    assert sent[0] < 64 << 20


def test_a_body_of_a_million_values_is_refused_before_it_is_parsed() -> None:
    page = b'{"artifacts": [' + b"[]," * 1_200_000 + b'[]], "next_after": null}'

    async def body(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable, match="more than 1000000 values"):
            await w.list()

    serve(canned(200, page), body)
    # Separators inside strings are no values: a text full of commas parses.
    text = b'{"stdout": "' + b",:[{" * 1_000_000 + b'"}'
    assert len(wire.load(text)["stdout"]) == 4_000_000
    with pytest.raises(airlock.DecodeError, match="more than 10 values"):
        wire.load(b"[1,2,3,4,5,6,7,8,9,10,11]", max_values=10)


# ---- what an answer is: statuses, types, shapes ----------------------------------------


@pytest.mark.parametrize("status,text,ctype,match", [
    (200, b"<html><body>gateway</body></html>", "text/html", "does not decode"),
    (200, b'{"status": "ok", "status": "evil"}', "application/json", "duplicate"),
    (200, b'{"status": NaN}', "application/json", "not JSON"),
    (200, b'{"status": "ok"', "application/json", "not JSON"),
    (200, b"\xff\xfe{}", "application/json", "not JSON"),
    (200, b"[" * 100000 + b"]" * 100000, "application/json", "not JSON"),
    (200, b'"ok"', "application/json", "not an object"),
    (202, b'{"status": "ok"}', "application/json", "where 200 was expected"),
    (302, b"", "text/html", "status 302"),
    (404, b"<html>not found</html>", "text/html", "status 404"),
])
def test_an_unexpected_answer_fails_loudly(status: int, text: bytes, ctype: str, match: str) -> None:
    extra = "Location: http://169.254.169.254/latest/\r\n" if status == 302 else ""

    async def body(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable, match=match):
            await w.health()
        assert len(srv.requests) == 1  # a redirect is not followed, nothing is retried

    serve(canned(status, text, ctype, extra), body)


def test_an_answer_that_is_not_http_or_has_endless_headers_is_unavailable() -> None:
    async def not_http(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()

    async def endless_headers(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(100000):
            writer.write(b"X-Pad-%d: %s\r\n" % (i, b"p" * 100))
            await writer.drain()

    async def two_lengths(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\n{}")
        await writer.drain()

    for h in (not_http, endless_headers, two_lengths):
        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.ExecutionUnavailable):
                await w.health()

        serve(h, body)


def test_a_request_too_large_for_the_server_is_not_retriable() -> None:
    for status in (413, 414, 431):
        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.ToolValidationError, match=f"too large for the server \\(HTTP {status}\\)") as e:
                await w.health()
            assert not airlock.is_retriable(e.value)

        serve(canned(status, b"<html>too large</html>", "text/html"), body)


def test_a_success_status_the_route_does_not_answer_is_refused() -> None:
    async def body(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable, match="200 where 204 was expected"):
            await w.release("run-1", 1)
        with pytest.raises(airlock.ExecutionUnavailable, match="200 where 204 was expected"):
            await w.delete(AID)

    serve(canned(200, b"{}"), body)

    # A 204 has no body to HTTP: bytes sent after one are no answer to
    # anything, and the connection holding them is not reused.
    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n" + answer(200, b'{"status": "smuggled"}'))
        await writer.drain()
        return True

    async def body204(srv: Hostile, w: WorkerClient) -> None:
        await w.release("run-1", 1)
        with pytest.raises(airlock.ExecutionUnavailable):
            await w.health()  # a new connection, answered 204 (not the smuggled 200)
        assert len(srv.requests) == 2

    serve(h, body204)


def test_a_lease_for_another_run_is_an_escape_and_a_bad_lease_does_not_decode() -> None:
    def lease(**o: Any) -> bytes:
        base = {"run_id": "run-1", "tenant_id": "t", "epoch": 1, "outcome": "new",
                "expires_at": "2026-12-01T00:00:00.000Z", "expires_at_ms": 1796083200000, "bridge": False}
        base.update(o)
        return json.dumps(base).encode()

    others: list[dict[str, Any]] = [{"run_id": "run-2"}, {"tenant_id": "u"}, {"epoch": 2}, {"bridge": True}]
    for other in others:
        async def escape(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.SandboxEscapeSuspected) as e:
                await w.claim("run-1", "t", 1, 30)
            assert not airlock.is_retriable(e.value)

        serve(canned(200, lease(**other)), escape)
    bads: list[dict[str, Any]] = [{"outcome": "stolen"}, {"epoch": "1"}, {"epoch": True}, {"bridge": 0},
                                  {"extra": 1}, {"expires_at": "yesterday"}]
    for bad in bads:
        async def undecodable(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.ExecutionUnavailable, match="does not decode"):
                await w.claim("run-1", "t", 1, 30)

        serve(canned(200, lease(**bad)), undecodable)


def test_an_escape_is_never_made_retriable_by_its_status() -> None:
    escape = b'{"error": "SandboxEscapeSuspected", "message": "the handle is not this sandbox\'s"}'
    for status in (403, 502, 503, 504):
        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.SandboxEscapeSuspected) as e:
                await w.health()
            assert not airlock.is_retriable(e.value)
            assert len(srv.requests) == 1

        serve(canned(status, escape), body)
    # Any other class under a 503 is the retriable one, as the C client maps it.
    async def other(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable) as e:
            await w.health()
        assert airlock.is_retriable(e.value)

    serve(canned(503, b'{"error": "ExecutionRejected", "message": "m"}'), other)


# ---- downloads ------------------------------------------------------------------------


def _download(handler: Handler, what: type[BaseException], match: str,
              ref: Callable[[], airlock.ArtifactRef | str] = lambda: AID) -> None:
    d = tempfile.mkdtemp(prefix="airlock-dl-")
    try:
        async def body(srv: Hostile, w: WorkerClient) -> None:
            dest = os.path.join(d, "out.bin")
            with pytest.raises(what, match=match):
                await w.download_to(ref(), dest)
            assert leftovers(d) == []  # nothing half-written, no temporary
            with pytest.raises(what, match=match):
                async for _ in await w.open(ref()):
                    pass

        serve(handler, body)
    finally:
        os.rmdir(d)


def test_a_download_whose_bytes_do_not_match_raises_and_writes_nothing() -> None:
    data = os.urandom(300000)
    bad = bytearray(data)
    bad[150000] ^= 1
    _download(artifact_server(data, served=bytes(bad)), airlock.ArtifactIntegrityError, "SHA-256")


def test_a_download_longer_than_declared_is_refused() -> None:
    data = os.urandom(1000)
    # Declared in Content-Length, and (below) sent chunked with no length.
    _download(artifact_server(data, served=data + b"more"), airlock.ArtifactIntegrityError, "declares")
    sha = hashlib.sha256(data).hexdigest()

    async def endless(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: "sha256:%s"\r\n\r\n' % sha.encode())
        while True:
            writer.write(b"1000\r\n" + b"x" * 4096 + b"\r\n")
            await writer.drain()

    _download(artifact_server(data, content=endless), airlock.ArtifactIntegrityError, "more than its 1000 bytes")


def test_a_download_cut_mid_body_fails_and_writes_nothing() -> None:
    data = os.urandom(200000)
    sha = hashlib.sha256(data).hexdigest()

    async def cut(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(200, data, "application/octet-stream", f'ETag: "sha256:{sha}"\r\n')[:100000])
        await writer.drain()

    _download(artifact_server(data, content=cut), airlock.ExecutionUnavailable, "closed|incomplete|peer")


def test_a_download_with_another_etag_or_status_is_refused() -> None:
    data = b"abc"

    async def etag(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(200, data, "text/plain", 'ETag: "sha256:' + "0" * 64 + '"\r\n'))
        await writer.drain()

    _download(artifact_server(data, content=etag), airlock.ArtifactIntegrityError, "ETag")

    async def partial(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(206, data[:1], "text/plain", "Content-Range: bytes 0-0/3\r\n"))
        await writer.drain()

    _download(artifact_server(data, content=partial), airlock.ExecutionUnavailable, "206 where 200")


def test_metadata_of_another_artifact_is_refused() -> None:
    other = "0192d3f5-1234-7abc-8def-0123456789ac"
    _download(artifact_server(b"abc", meta_id=other), airlock.ArtifactIntegrityError, f"answered {other}")


def test_a_reference_the_metadata_contradicts_is_refused_by_every_download() -> None:
    data = b"the bytes the caller was promised"
    lie = b"other bytes, served consistently"
    ref = airlock.ArtifactRef(airlock.ArtifactId(AID), hashlib.sha256(data).hexdigest(), len(data),
                              "application/octet-stream")
    # The worker's metadata and content agree with each other, not with the
    # reference the caller holds (download_to used to check only the former).
    _download(artifact_server(lie), airlock.ArtifactIntegrityError, "reference says", lambda: ref)
    short = dataclasses.replace(ref, sha256=hashlib.sha256(lie).hexdigest(), size_bytes=len(lie) + 1)
    _download(artifact_server(lie), airlock.ArtifactIntegrityError, "reference says", lambda: short)


def test_a_slow_loris_download_is_cut_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # One byte every 50 ms never trips the per-read stall; the transfer's
    # deadline (base, plus a second per 64 KiB) must end it.
    monkeypatch.setattr(worker, "TRANSFER_BASE_S", 0.5)
    data = b"x" * 100000
    sha = hashlib.sha256(data).hexdigest()

    async def trickle(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nETag: "sha256:%s"\r\n\r\n' % sha.encode())
        for _ in range(100000):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    _download(artifact_server(data, content=trickle), airlock.ExecutionUnavailable, "of 100000 bytes within")


def test_a_download_cancelled_midway_leaves_nothing() -> None:
    data = os.urandom(1 << 20)
    sha = hashlib.sha256(data).hexdigest()
    halfway = asyncio.Event()

    async def stall(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(200, data, "application/octet-stream", f'ETag: "sha256:{sha}"\r\n')[: 1 << 19])
        await writer.drain()
        halfway.set()
        await asyncio.sleep(HANG_S)

    d = tempfile.mkdtemp(prefix="airlock-dl-")
    try:
        async def body(srv: Hostile, w: WorkerClient) -> None:
            dest = os.path.join(d, "out.bin")
            task = asyncio.ensure_future(w.download_to(AID, dest))
            await halfway.wait()
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert leftovers(d) == []
            # And an iteration the caller abandons: closed by aclose.
            it = await w.open(AID)
            assert isinstance(it, AsyncIterator)
            async for _ in it:
                break
            await it.aclose()  # type: ignore[attr-defined]

        serve(artifact_server(data, content=stall), body)
    finally:
        os.rmdir(d)


# ---- slow servers and cut connections on JSON calls -------------------------------------


def test_a_slow_loris_answer_is_cut_at_the_calls_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "SHORT_TIMEOUT_S", 0.5)

    trickle = trickle_answer

    async def informational(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(100000):
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)

    for h in (trickle, informational):
        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.ExecutionUnavailable, match="no whole answer within 0.5 s"):
                await w.health()

        serve(h, body)


def test_a_connection_dropped_mid_body_is_unavailable() -> None:
    async def drop(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"status": ')
        await writer.drain()

    async def silent(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return None

    for h in (drop, silent):
        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(airlock.ExecutionUnavailable) as e:
                await w.health()
            assert airlock.is_retriable(e.value)

        serve(h, body)


def test_an_execute_stream_that_trickles_events_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "EXECUTE_MARGIN_S", 0.5)
    h = HANDLE

    async def main() -> None:
        async with Hostile(trickle_events) as srv:
            async with ServiceEnvironment(srv.address, TOKEN) as env:
                with pytest.raises(airlock.ExecutionUnavailable, match="no result within 1.5 s"):
                    await env.execute(h, airlock.ExecutionCommand(("true",), PurePosixPath("."), 1, None, 100))

    run(main)


def test_a_cancelled_execute_whose_result_never_comes_raises_cancelled_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The service says it cancelled, then sends nothing: once the wait for
    # the CANCELLED result is over, the caller's cancellation propagates as
    # one (it was wait_for's TimeoutError, an OSError, taken for an errno).
    monkeypatch.setattr(service, "CANCEL_RESULT_WAIT_S", 0.5)
    h = HANDLE
    started = asyncio.Event()

    async def never(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await body_of(req, reader)
        if req.target.endswith("/cancel"):
            writer.write(answer(200, b'{"cancelled": true}'))
            await writer.drain()
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        started.set()
        await asyncio.sleep(HANG_S)
        return False

    async def main() -> None:
        async with Hostile(never) as srv:
            async with ServiceEnvironment(srv.address, TOKEN) as env:
                task = asyncio.ensure_future(
                    env.execute(h, airlock.ExecutionCommand(("true",), PurePosixPath("."), 5, None, 100)))
                await started.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert any(r.target.endswith("/cancel") for r in srv.requests)

    run(main)


# ---- what goes into a URL, and arguments refused before sending -----------------------


@pytest.mark.parametrize("call", [
    lambda w: w.claim("../../v1/reaper/stale", "t", 1, 30),
    lambda w: w.claim("run?x=1", "t", 1, 30),
    lambda w: w.claim("run%2f..", "t", 1, 30),
    lambda w: w.claim("run-1", "t&tenant_id=other", 1, 30),
    lambda w: w.claim("run-1", "t", 1.5, 30),
    lambda w: w.claim("run-1", "t", True, 30),
    lambda w: w.claim("run-1", "t", -1, 30),
    lambda w: w.claim("run-1", "t", 1, 0),
    lambda w: w.claim("run-1", "t", 1, 86401),
    lambda w: w.claim("run-1", "t", 1, 30, bridge="yes"),
    lambda w: w.release("run-1", "1"),
    lambda w: w.release("run-1", 1, tenant_id="t#frag"),
    lambda w: w.run_command("a/b", 1, ["true"]),
    lambda w: w.run_command("run-1", 1, ["true"], deadline_ms=1.0),
    lambda w: w.run_command("run-1", 1, ["true"], network_enabled="false"),
    lambda w: w.metadata("../../etc/passwd"),
    lambda w: w.metadata(AID.upper()),
    lambda w: w.delete(AID + "/content"),
    lambda w: w.attach("run-1", "x?y"),
    lambda w: w.list(after="not-an-id"),
    lambda w: w.list(limit=0),
    lambda w: w.list(limit=1001),
    lambda w: w.list(run_id="run 1"),
    lambda w: w.upload(b"x", "f", sha256="0" * 64 + "\r\nX-Evil: 1"),
    lambda w: w.upload(b"x", "f", sha256="not-hex"),
    lambda w: w.upload(b"x", "f", "text/plain; charset=utf-8"),
    lambda w: w.upload(b"x", "f", "text/plain\r\nX-Evil: 1"),
    lambda w: w.upload(b"x", ""),
    lambda w: w.upload(b"x", "\ud800"),
    lambda w: w.upload(b"x", "n" * 20000),
    lambda w: w.call_tool("run-1", "", 1, {}),
    lambda w: w.call_tool("run-1", "sandbox.run_command", 1, {"command": ["true"], "timeout_seconds": 1.5}),
    lambda w: w.call_tool("run-1", "sandbox.run_command", 1, {"command": [b"true"]}),
    lambda w: w.export("run-1", 1, text="\ud800"),
    lambda w: w.export("run-1", 1, path="a", text="b"),
])
def test_a_bad_argument_is_refused_before_anything_is_sent(call: Callable[[WorkerClient], Awaitable[Any]]) -> None:
    async def body(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ToolValidationError):
            await call(w)
        assert srv.requests == []

    serve(canned(500, b""), body)


def test_names_and_tools_are_quoted_into_the_url() -> None:
    sha = hashlib.sha256(b"x").hexdigest()
    ref = json.dumps({"artifact_id": AID, "sha256": sha, "size_bytes": 1, "media_type": "text/plain"}).encode()

    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await body_of(req, reader)
        writer.write(answer(201 if req.method == "POST" and "/v1/artifacts?" in req.target else 200,
                            ref if "artifacts" in req.target else b'{"exit_code": 0}'))
        await writer.drain()
        return True

    name = os.fsdecode(b"a&tenant_id=other#x/../%2e?\xff \n")

    async def body(srv: Hostile, w: WorkerClient) -> None:
        await w.upload(b"x", name, "text/plain")
        await w.call_tool("run-1", "sandbox.run_command/../../x?y#z", 1, {})
        up, tool = srv.requests
        path, _, query = up.target.partition("?")
        assert path == "/v1/artifacts"
        q = urllib.parse.parse_qs(query, encoding="latin-1", keep_blank_values=True)
        assert set(q) == {"filename", "media_type"}  # the name's '&' and '=' did not add a key
        assert os.fsencode(name) == urllib.parse.unquote_to_bytes(query.split("&")[0].removeprefix("filename="))
        assert tool.target == "/v1/runs/run-1/tools/sandbox.run_command%2F..%2F..%2Fx%3Fy%23z"

    serve(h, body)


def test_a_handle_whose_id_would_rewrite_the_url_is_refused_before_sending() -> None:
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    h = airlock.EnvironmentHandle("env_0", airlock.TenantId("t"), airlock.RunId("r"), 1, now, now)

    async def main() -> None:
        async with Hostile(canned(500)) as srv:
            async with ServiceEnvironment(srv.address, TOKEN) as env:
                for eid in ("../../v1/sandboxes", "env_0/execute?x=", "env 0", "e" * 64):
                    bad = dataclasses.replace(h, environment_id=eid)
                    with pytest.raises(airlock.ExecutionRejected, match="environment_id"):
                        await env.destroy(bad)
                    with pytest.raises(airlock.ExecutionRejected, match="environment_id"):
                        await env.execute(bad, airlock.ExecutionCommand(("true",), PurePosixPath("."), 1, None, 1))
                    with pytest.raises(airlock.ExecutionRejected, match="environment_id"):
                        await env.workspace(bad).read("f")
                # The caller's values, refused before sending with the class
                # the in-process port refuses them with.
                good = airlock.ExecutionCommand(("true",), PurePosixPath("."), 1, None, 1)
                for cmd in (dataclasses.replace(good, timeout_seconds=0), dataclasses.replace(good, argv=()),
                            dataclasses.replace(good, argv="true"), dataclasses.replace(good, argv=None),
                            dataclasses.replace(good, stdin="text"), dataclasses.replace(good, argv=("a", 1))):
                    with pytest.raises(airlock.ToolValidationError, match="ExecutionCommand"):
                        await env.execute(h, cmd)
                with pytest.raises(airlock.ToolValidationError, match="ExecutionCommand"):
                    await env.execute(h, ("true",))  # type: ignore[arg-type]
                for bad_handle in (dataclasses.replace(h, expires_at=now - timedelta(seconds=1)),
                                   dataclasses.replace(h, tenant_id="t/../u"),
                                   dataclasses.replace(h, created_at=datetime(2026, 12, 1))):
                    with pytest.raises(airlock.ExecutionRejected, match="EnvironmentHandle"):
                        await env.execute(bad_handle, good)
                    with pytest.raises(airlock.ExecutionRejected, match="EnvironmentHandle"):
                        await env.destroy(bad_handle)
                spec = airlock.EnvironmentSpec(
                    airlock.TenantId("t"), airlock.RunId("r"), 1, "sha256:" + "0" * 64,
                    airlock.ResourceLimits(1000, 256 << 20, 64, 64 << 20, 10000, 60),
                    airlock.EgressPolicy(airlock.EgressMode.DENY, ()), {}, None)
                for bad_spec in (dataclasses.replace(spec, image_digest="debian:latest"),
                                 dataclasses.replace(spec, run_id="r/../s"),
                                 dataclasses.replace(spec, lease_epoch=-1),
                                 dataclasses.replace(spec, environment={"A=B": "c"}),
                                 dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, memory_bytes=1))):
                    with pytest.raises(airlock.ExecutionRejected, match="EnvironmentSpec"):
                        await env.provision(bad_spec)
                with pytest.raises(airlock.ToolValidationError, match="remaining_budget_ms"):
                    await env.execute(h, airlock.ExecutionCommand(("true",), PurePosixPath("."), 1, None, 1),
                                      remaining_budget_ms=1.5)  # type: ignore[arg-type]
                with pytest.raises(airlock.ToolValidationError, match="max_bytes"):
                    await env.workspace(h).read("f", max_bytes=-1)
                assert srv.requests == []

    run(main)


@pytest.mark.parametrize("address", [
    f"{TOKEN}@127.0.0.1:8443", "https://127.0.0.1:8443", "127.0.0.1:8443/v1", "127.0.0.1:0", "127.0.0.1:65536",
    "127.0.0.1", "127.0.0.1:\u0661\u0662", "host name:443", "unix:relative.sock", "unix:", "",
])
def test_an_address_that_is_not_unix_or_host_port_is_refused(address: str) -> None:
    with pytest.raises(airlock.ConfigurationError) as e:
        WorkerClient(address, TOKEN)
    assert TOKEN not in str(e.value)
    with pytest.raises(airlock.ConfigurationError):
        ServiceEnvironment(address, TOKEN)


# ---- uploads ------------------------------------------------------------------------------


def test_a_file_that_changes_while_it_is_uploaded_is_an_integrity_error() -> None:
    d = tempfile.mkdtemp(prefix="airlock-up-")
    src = os.path.join(d, "f")
    try:
        for change in ("grow", "shrink"):
            with open(src, "wb") as f:
                f.write(os.urandom(8 << 20))

            async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                # The head is here, the body (far past the socket's buffer)
                # not yet read: the file changes under the client's reads.
                if change == "grow":
                    with open(src, "ab") as f:
                        f.write(b"more")
                else:
                    os.truncate(src, 4 << 20)
                try:
                    await body_of(req, reader)
                except asyncio.IncompleteReadError:
                    return
                writer.write(answer(500))
                await writer.drain()

            async def body(srv: Hostile, w: WorkerClient) -> None:
                with pytest.raises(airlock.ArtifactIntegrityError, match="grew" if change == "grow" else "shrank"):
                    await w.upload(src, "f")

            serve(h, body)
    finally:
        os.unlink(src)
        os.rmdir(d)


def test_an_upload_answered_with_another_reference_is_refused() -> None:
    data = b"uploaded bytes"
    sha = hashlib.sha256(data).hexdigest()
    lies: list[tuple[dict[str, Any], type[airlock.AirlockError]]] = [
        ({"sha256": "0" * 64}, airlock.ArtifactIntegrityError),
        ({"size_bytes": len(data) + 1}, airlock.ArtifactIntegrityError),
        ({"media_type": "text/html"}, airlock.ExecutionUnavailable),
    ]
    for other, raised in lies:
        ref = {"artifact_id": AID, "sha256": sha, "size_bytes": len(data), "media_type": "text/plain", **other}

        async def body(srv: Hostile, w: WorkerClient) -> None:
            with pytest.raises(raised):
                await w.upload(data, "f", "text/plain")

        serve(canned(201, json.dumps(ref).encode()), body)

    async def wrong_status(srv: Hostile, w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionUnavailable, match="200 where 201"):
            await w.upload(data, "f", "text/plain")

    ok = {"artifact_id": AID, "sha256": sha, "size_bytes": len(data), "media_type": "text/plain"}
    serve(canned(200, json.dumps(ok).encode()), wrong_status)


# ---- the credential ------------------------------------------------------------------------


def _package_locals(e: BaseException) -> list[str]:
    """The repr of every local of this package's frames in ``e``'s
    traceback and its chain: what an error reporter capturing locals (its
    default) would send."""
    out: list[str] = []
    for x in _chain(e):
        tb = x.__traceback__
        while tb is not None:
            f = tb.tb_frame
            if f"{os.sep}airlock{os.sep}" in f.f_code.co_filename:
                for k, v in f.f_locals.items():
                    try:
                        out.append(f"{f.f_code.co_name}.{k}={v!r}")
                    except Exception as err:  # a repr that fails is a finding too
                        out.append(f"{f.f_code.co_name}.{k}: repr failed: {err!r}")
            tb = tb.tb_next
    return out


def test_no_frame_of_the_package_holds_the_credential_when_construction_fails() -> None:
    kinds: list[str | bytes | airlock.SecretValue] = [TOKEN, TOKEN.encode(), airlock.SecretValue(TOKEN)]
    for credential in kinds:
        settings: list[tuple[str, dict[str, str]]] = [
                            ("127.0.0.1:8443", {"tls_ca_file": "/nonexistent/ca.pem"}),
                            ("127.0.0.1:8443", {"tls_cert_file": "/nonexistent/c.pem", "tls_key_file": "/x"}),
                            ("127.0.0.1:8443", {"tls_cert_file": "/nonexistent/c.pem"}),
                            ("bad address", {})]
        for address, kw in settings:
            for cls in (WorkerClient, ServiceEnvironment):
                with pytest.raises(airlock.ConfigurationError) as e:
                    cls(address, credential, **kw)
                # The setting and the file are named; no frame holds the
                # credential, and every repr works on what failed to build.
                assert address in str(e.value)
                assert "tls_ca_file" not in kw or "tls_ca_file '/nonexistent/ca.pem'" in str(e.value)
                found = _package_locals(e.value)
                assert found and [x for x in found if TOKEN in x or "repr failed" in x] == []
    bads: list[str | bytes | airlock.SecretValue] = [TOKEN + "\n\x01", TOKEN.encode() + b"\xff",
                                                     airlock.SecretValue(TOKEN + " x")]
    for bad in bads:
        with pytest.raises(airlock.ConfigurationError) as e:
            WorkerClient("unix:/nonexistent.sock", bad)
        assert [x for x in _package_locals(e.value) if TOKEN in x or "repr failed" in x] == []


def _chain(e: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def test_the_credential_is_in_no_exception_message_or_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = json.dumps({"error": "ToolValidationError", "message": f"bad header: Bearer {TOKEN}"}).encode()
    errno_echo = json.dumps({"error": "SystemError", "errno": "ENOENT", "message": f"no {TOKEN}"}).encode()
    # (handler, whether the server's own answer carries the credential: its
    # bytes are then in the frames' locals as the server sent them, and
    # only messages, logs and tracebacks are checked)
    handlers: list[tuple[Handler, bool]] = [
        (canned(400, echo), True), (canned(503, echo), True), (canned(401, echo), True),
        (canned(422, errno_echo), True), (canned(200, b"<" + TOKEN.encode() + b">"), True),
        (canned(302, b"", extra=f"Location: /{TOKEN}\r\n"), True),
        (canned(400, b'{"error": "ToolValidationError", "message": "m"}'), False), (canned(503), False),
        (canned(200, b"<html>"), False), (canned(502, b'{"error": "SandboxEscapeSuspected", "message": "m"}'), False),
    ]

    async def closes(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        return None

    handlers.append((closes, False))
    texts: list[str] = []
    credentials: list[str | bytes | airlock.SecretValue] = [TOKEN, TOKEN.encode(), airlock.SecretValue(TOKEN)]
    for credential in credentials:
        for h, echoes in handlers:
            async def main() -> None:
                async with Hostile(h) as srv:
                    clients: list[WorkerClient | ServiceEnvironment] = [
                        WorkerClient(srv.address, credential), ServiceEnvironment(srv.address, credential)]
                    for client in clients:
                        async with client:
                            texts.append(repr(client))
                            try:
                                await client.health()
                            except (airlock.AirlockError, OSError) as e:
                                texts.extend(traceback.format_exception(e))
                                if not echoes:
                                    texts.extend(_package_locals(e))
                                for x in _chain(e):
                                    texts.extend((str(x), repr(x), repr(x.args)))
                                    logging.getLogger("platform").exception("health failed: %s", x)
                            else:
                                raise AssertionError("a hostile answer was taken")
                    assert srv.requests and all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in srv.requests)

            run(main)
    texts.append(caplog.text)
    leaked = [t for t in texts if TOKEN in t]
    assert leaked == []
    assert any("<credential>" in t for t in texts)  # the echo was there, cut out


@dataclass(frozen=True)
class Holder:
    """A platform's own record holding a secret."""

    name: str
    secret: airlock.SecretValue


def test_a_secret_value_survives_copy_asdict_and_stays_redacted(caplog: pytest.LogCaptureFixture) -> None:
    s = airlock.SecretValue(TOKEN)
    holder = Holder("n", s)
    assert copy.copy(s) is s and copy.deepcopy(s) is s
    d = dataclasses.asdict(holder)
    assert d["secret"] is s
    assert copy.deepcopy(holder).secret is s
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError) as e:
            pickle.dumps(holder, protocol=proto)
        assert TOKEN not in str(e.value)
    with pytest.raises(TypeError) as e:
        json.dumps(d)
    assert TOKEN not in str(e.value)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("platform").info("holder %s %r %s", holder, d, s)
    try:
        raise ValueError(s, holder)
    except ValueError as x:
        logging.getLogger("platform").exception("failed")
        texts = [str(x), repr(x), *traceback.format_exception(x)]
    texts += [caplog.text, repr(holder), str(d), f"{s!s:>40}", "%s %r" % (s, s), "{0} {0!r}".format(s)]
    assert [t for t in texts if TOKEN in t] == []


# ---- a process with many descriptors ---------------------------------------------------------


def test_a_kept_connection_is_reused_past_descriptor_1024() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"RLIMIT_NOFILE's hard limit is {hard}: no descriptor past 1024 can be opened")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open("/dev/null", os.O_RDONLY))
        served = [0]

        async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
            served[0] += 1
            writer.write(answer(200, b'{"status": "ok"}'))
            await writer.drain()
            return True

        async def body(srv: Hostile, w: WorkerClient) -> None:
            for _ in range(3):
                assert (await w.health())["status"] == "ok"
            # One connection, kept: select() on its descriptor used to fail.
            assert len(srv.requests) == 3

        serve(h, body)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))



# ---- paths and errors inside an execute's stream and a listing -------------------------------


def _result(files: list[dict[str, Any]]) -> dict[str, Any]:
    return {"exit_code": 0, "stdout": "", "stderr": "", "stdout_truncated": False, "stderr_truncated": False,
            "timed_out": False, "killed_by": None, "files_changed": files, "files_changed_truncated": False,
            "duration_ms": 1}


def _stream_server(lines: list[bytes], listing: bytes = b"") -> Handler:
    async def h(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await body_of(req, reader)
        if "/workspace/dir" in req.target:
            writer.write(answer(200, listing))
        else:
            body = b"".join(line + b"\n" for line in lines)
            writer.write(answer(200, body, "application/x-ndjson"))
        await writer.drain()
        return True

    return h


def test_a_path_outside_the_workspace_in_an_answer_is_refused() -> None:
    h = HANDLE
    command = airlock.ExecutionCommand(("true",), PurePosixPath("."), 5, None, 100)
    sha = "0" * 64
    for path in ("../outside", "a/../../b", "..", "/etc/passwd"):
        change = {"path": path, "change": "CREATED", "kind": "FILE", "size_bytes": 0, "sha256": sha}
        result = json.dumps({"event": "result", "result": _result([change])}).encode()
        listing = json.dumps({"entries": [{"path": path, "type": "FILE", "size_bytes": 0}],
                              "truncated": False}).encode()

        async def main() -> None:
            async with Hostile(_stream_server([b'{"event": "started"}', result], listing)) as srv:
                async with ServiceEnvironment(srv.address, TOKEN) as env:
                    with pytest.raises(airlock.ExecutionUnavailable, match="outside the workspace|not decode"):
                        await env.execute(h, command)
                    with pytest.raises(airlock.ExecutionUnavailable, match="outside the workspace|not decode"):
                        await env.workspace(h).listdir(".")

        run(main)
    # An honest path passes both.
    change = {"path": "out/r.csv", "change": "CREATED", "kind": "FILE", "size_bytes": 0, "sha256": sha}
    result = json.dumps({"event": "result", "result": _result([change])}).encode()
    listing = json.dumps({"entries": [{"path": "out/r.csv", "type": "FILE", "size_bytes": 0}],
                          "truncated": False}).encode()

    async def honest() -> None:
        async with Hostile(_stream_server([result], listing)) as srv:
            async with ServiceEnvironment(srv.address, TOKEN) as env:
                r = await env.execute(h, command)
                assert [str(c.path) for c in r.files_changed] == ["out/r.csv"]
                assert [str(e.path) for e in await env.workspace(h).listdir("out")] == ["out/r.csv"]

    run(honest)


def test_an_error_event_keeps_its_class_and_loses_the_credential() -> None:
    h = HANDLE
    command = airlock.ExecutionCommand(("true",), PurePosixPath("."), 5, None, 100)
    for cls in ("SandboxEscapeSuspected", "ExecutionRejected", "ExecutionUnavailable"):
        event = json.dumps({"event": "error", "error": {"error": cls, "message": f"echo {TOKEN}"}}).encode()

        async def main() -> None:
            async with Hostile(_stream_server([b'{"event": "started"}', event])) as srv:
                async with ServiceEnvironment(srv.address, TOKEN) as env:
                    with pytest.raises(airlock.AirlockError) as e:
                        await env.execute(h, command)
                    assert type(e.value).__name__ == cls
                    assert TOKEN not in str(e.value) and "<credential>" in str(e.value)
                    assert len(srv.requests) == 1

        run(main)


# ---- the same over TCP and TLS (httpx's own transport, not the Unix one) ------------------


@pytest.fixture(scope="module")
def certificate() -> Iterator[tuple[str, str]]:
    d = tempfile.mkdtemp(prefix="airlock-hostile-tls-")
    try:
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        yield cert, key
    finally:
        shutil.rmtree(d)


def test_over_tls_caps_deadlines_and_digests_hold(certificate: tuple[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "SHORT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(worker, "TRANSFER_BASE_S", 0.5)

    endless = endless_chunked

    trickle = trickle_answer

    data = os.urandom(100000)
    sha = hashlib.sha256(data).hexdigest()

    async def trickle_download(req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nETag: "sha256:%s"\r\n\r\n' % sha.encode())
        for i in range(100000):
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(0.05)

    lie = bytearray(data)
    lie[5] ^= 1
    cases: list[tuple[Handler, Callable[[WorkerClient], Awaitable[Any]], type[BaseException], str]] = [
        (endless, lambda w: w.health(), airlock.ExecutionUnavailable, "over the 1048576 byte cap"),
        (trickle, lambda w: w.health(), airlock.ExecutionUnavailable, "no whole answer within 0.5 s"),
        (artifact_server(data, content=trickle_download), lambda w: _drain(w), airlock.ExecutionUnavailable,
         "of 100000 bytes within"),
        (artifact_server(data, served=bytes(lie)), lambda w: _drain(w), airlock.ArtifactIntegrityError, "SHA-256"),
        (canned(503, b'{"error": "SandboxEscapeSuspected", "message": "m"}'), lambda w: w.health(),
         airlock.SandboxEscapeSuspected, "m"),
    ]
    for handler, call, raised, match in cases:
        async def main() -> None:
            async with Hostile(handler, tls=certificate) as srv:
                async with WorkerClient(srv.address, TOKEN, tls_ca_file=certificate[0]) as w:
                    with pytest.raises(raised, match=match):
                        await call(w)
                    # The caller's task is left as it was: not counted as
                    # cancelling (httpx's TLS transport under anyio 3.6 left
                    # it so, and a raw CancelledError came out).
                    task = asyncio.current_task()
                    assert task is not None and task.cancelling() == 0

        run(main)

    # The caller's own timeout scope around a call: its TimeoutError, once.
    monkeypatch.setattr(worker, "SHORT_TIMEOUT_S", 30.0)

    async def scoped() -> None:
        async with Hostile(trickle, tls=certificate) as srv:
            async with WorkerClient(srv.address, TOKEN, tls_ca_file=certificate[0]) as w:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.3):
                        await w.health()
                task = asyncio.current_task()
                assert task is not None and task.cancelling() == 0

    run(scoped)

    # An execute stream trickling events over TLS: cut at its deadline.
    monkeypatch.setattr(service, "EXECUTE_MARGIN_S", 0.5)
    h = HANDLE

    async def execute() -> None:
        async with Hostile(trickle_events, tls=certificate) as srv:
            async with ServiceEnvironment(srv.address, TOKEN, tls_ca_file=certificate[0]) as env:
                with pytest.raises(airlock.ExecutionUnavailable, match="no result within 1.5 s"):
                    await env.execute(h, airlock.ExecutionCommand(("true",), PurePosixPath("."), 1, None, 100))
                task = asyncio.current_task()
                assert task is not None and task.cancelling() == 0

    run(execute)


async def _drain(w: WorkerClient) -> None:
    async for _ in await w.open(AID):
        pass
