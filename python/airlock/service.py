"""``ExecutionEnvironment`` and ``WorkspaceHandle`` over ``airlock serve``'s
API (docs/service-api.md), as the C remote adapter is (docs/remote.md).

The service does every check the in-process port does: a handle is sent
whole in ``Airlock-Handle`` and compared with what the service provisioned,
so a forged or stale handle is ``SandboxEscapeSuspected`` (and that sandbox
destroyed) or ``ExecutionRejected``, exactly as in process. Nothing here
retries: ``ExecutionUnavailable`` is the only retriable failure
(:func:`airlock.is_retriable`), and retrying is the caller's decision.
"""

import asyncio
import base64
import os
import secrets
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Any

import httpx

from . import wire
from ._http import SMALL_MAX, TRANSPORT_ERRORS, Client, _redact, keep, raise_for, read_capped, seal, transport_failure
from .errors import (
    AirlockError,
    DecodeError,
    ExecutionRejected,
    ExecutionUnavailable,
    SandboxEscapeSuspected,
    ToolValidationError,
    WorkspaceEscape,
)
from .types import (
    DirEntry,
    ChangeKind,
    EntryType,
    EnvironmentHandle,
    EnvironmentSpec,
    ExecutionCommand,
    ExecutionResult,
    FileChange,
    FileKind,
    SecretValue,
    WorkspaceProvenance,
)

ROOT = PurePosixPath("/workspace")
# The caps the C client sets (docs/remote.md, "Caps").
JSON_MAX = wire.JSON_INPUT_MAX
STREAM_MAX = 2 * wire.JSON_INPUT_MAX
READ_MAX = 64 * 1024 * 1024
LISTDIR_MAX = 100000
# docs/remote.md, "Client timeouts".
EXECUTE_MARGIN_S = 60.0
DESTROY_TIMEOUT_S = 60.0
SHORT_TIMEOUT_S = 10.0
WORKSPACE_TIMEOUT_S = 120.0
PROVISION_MARGIN_S = 10.0
# A cancel fired before the service started the command finds nothing to
# cancel: it is repeated this often until the service says it cancelled or
# the result arrives.
CANCEL_REPEAT_S = 0.05
# How long a cancelled execute waits for its CANCELLED result.
CANCEL_RESULT_WAIT_S = 30.0

OutputCallback = Callable[[str, bytes], None]


def resolve(path: str | PurePosixPath) -> PurePosixPath:
    """The containment function's string rules (the specification's rules
    1, 2 and 4): ``/workspace/<path>`` or :class:`WorkspaceEscape`. ``""``
    and ``"."`` name the root. Rule 3 (no symlink leads out) needs the
    volume: the service applies it on every verb, and
    :meth:`ServiceWorkspace.contain` asks it."""
    raw = os.fsencode(path) if isinstance(path, str) else os.fsencode(str(path))
    if isinstance(path, PurePosixPath) and str(path) == ".":
        raw = b"."
    if raw in (b"", b"."):
        return ROOT
    if b"\0" in raw:
        raise WorkspaceEscape("path: contains a NUL byte")
    if raw.startswith(b"/"):
        raise WorkspaceEscape("path: must be relative to /workspace, not absolute")
    if len(raw) > 4096:
        raise WorkspaceEscape(f"path: {len(raw)} bytes, longer than 4096")
    for comp in raw.split(b"/"):
        if comp in (b"", b".", b".."):
            what = "an empty" if not comp else f"a {comp.decode()!r}"
            raise WorkspaceEscape(f"path: {what} component is refused")
        if len(comp) > 255:
            raise WorkspaceEscape(f"path: a component of {len(comp)} bytes, longer than 255")
    return ROOT / os.fsdecode(raw)


def _q(path: str) -> str:
    # Any byte, percent-encoded; '+' is a plus sign on the service's side.
    return urllib.parse.quote_from_bytes(os.fsencode(path), safe="")


def _call_back(cb: OutputCallback, stream: str, data: bytes) -> None:
    # What the callback raises ends the execute as it is.
    try:
        cb(stream, data)
    except OSError as e:
        raise keep(e)


def _encoded(v: object, cls: type[AirlockError]) -> bytes:
    """A caller's value in its wire form, or ``cls`` with the encoder's
    message: the class the in-process port refuses that value with (C:
    airlock_environment_spec_validate, airlock_execution_command_validate,
    check_handle), so a platform catching what the specification says a
    port raises catches it here too, before anything is sent."""
    try:
        return wire.to_json(v)
    except (DecodeError, TypeError, ValueError) as e:
        msg = e.message if isinstance(e, DecodeError) else f"{type(v).__name__}: {e}"
        raise cls(msg) from None


def _handle_header(h: EnvironmentHandle) -> str:
    if not isinstance(h, EnvironmentHandle):
        raise ExecutionRejected(f"environment: must be an EnvironmentHandle, not {type(h).__name__}")
    return base64.urlsafe_b64encode(_encoded(h, ExecutionRejected)).rstrip(b"=").decode("ascii")


def _eid(h: EnvironmentHandle) -> str:
    """The handle's id, checked before it goes into a URL path: a handle is
    the caller's to build, and its id could hold "/", "?" or "..". Refused
    as the service refuses a handle that is not its own."""
    if not isinstance(h, EnvironmentHandle):
        raise ExecutionRejected(f"environment: must be an EnvironmentHandle, not {type(h).__name__}")
    eid = h.environment_id
    if not isinstance(eid, str) or not wire._ID.match(eid) or len(eid) > wire.ENVIRONMENT_ID_MAX:
        raise ExecutionRejected("environment_id: must be 1..63 of [A-Za-z0-9_-] (an id the service gave)")
    return eid


class ServiceEnvironment(Client):
    """``ExecutionEnvironment`` over ``airlock serve``.

    ``address`` is ``unix:/path`` or ``HOST:PORT`` (TLS); ``credential`` the
    service credential (never logged, never in a message). Use as
    ``async with ServiceEnvironment(...) as env:`` or call :meth:`aclose`.
    """

    def __init__(
        self,
        address: str,
        credential: str | bytes | SecretValue,
        *,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        start_budget_seconds: int = 30,
        on_output: OutputCallback | None = None,
    ) -> None:
        sealed = seal(credential)
        del credential
        super().__init__(address, sealed, tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file,
                         tls_key_file=tls_key_file)
        self.start_budget_seconds = start_budget_seconds
        self.on_output = on_output
        self._cleanups: set[asyncio.Future[None]] = set()
        self._execute_urls: dict[str, httpx.URL] = {}

    async def _call(
        self,
        method: str,
        url: str,
        what: str,
        *,
        handle: EnvironmentHandle | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout: float = SHORT_TIMEOUT_S,
        cap: int = SMALL_MAX,
        expect: int = 200,
    ) -> tuple[int, bytes]:
        """One call: ``expect`` is the one success status the route
        answers (docs/service-api.md), ``cap`` what its answer can honestly
        be (SMALL_MAX but for a read and a listing)."""
        headers = {}
        if handle is not None:
            headers["Airlock-Handle"] = _handle_header(handle)
        if body is not None:
            headers["Content-Type"] = content_type
        return await self._request(method, url, what, headers=headers, content=body, timeout=timeout, cap=cap,
                                   expect=expect)

    def _json(self, data: bytes, what: str) -> Any:
        return self._decode(data, what)

    # ---- the port -----------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        _, data = await self._call("GET", "/v1/health", "health")
        o = self._json(data, "health")
        if not isinstance(o, dict):
            raise ExecutionUnavailable(f"{self.address}: health: not an object")
        return o

    async def provision(self, specification: EnvironmentSpec) -> EnvironmentHandle:
        """Provision a sandbox. Cancelling it does not leave one behind: the
        service finishes a provision it started whatever its client does,
        so the call goes on in the background (within the start budget),
        the sandbox it made is destroyed, and the cancellation propagates
        at once; :meth:`aclose` waits for that cleanup."""
        if not isinstance(specification, EnvironmentSpec):
            raise ExecutionRejected(f"specification: must be an EnvironmentSpec, not {type(specification).__name__}")
        spec_json = _encoded(specification, ExecutionRejected)
        call = asyncio.ensure_future(self._provision(specification, spec_json))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            # Also when the call has just ended: its handle reaches nobody.
            cleanup = asyncio.ensure_future(self._destroy_when_made(call))
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
            raise

    async def _destroy_when_made(self, call: "asyncio.Future[EnvironmentHandle]") -> None:
        try:
            h = await call
        except (AirlockError, OSError, asyncio.CancelledError):
            return
        try:
            await self.destroy(h)
        except (AirlockError, OSError):
            # The service's expiry ends it at expires_at in any case.
            pass

    async def aclose(self) -> None:
        """Wait for the cleanup of cancelled provisions, then close every
        connection."""
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        await super().aclose()

    async def _provision(self, specification: EnvironmentSpec, spec_json: bytes) -> EnvironmentHandle:
        # The caller's id, as the C core sends one: a provision whose answer
        # is lost can be found in the service's list under it.
        eid = "env_" + secrets.token_hex(16)
        body = "{" + '"spec":' + spec_json.decode() + ',"environment_id":' + wire.dump(eid) + "}"
        _, data = await self._call(
            "POST", "/v1/sandboxes", "provision", body=body.encode(),
            timeout=self.start_budget_seconds + PROVISION_MARGIN_S, expect=201,
        )
        o = self._json(data, "provision")
        try:
            if not isinstance(o, dict) or set(o) != {"handle"}:
                raise DecodeError("provision: the answer is not {\"handle\": ...}")
            h = wire.from_value(EnvironmentHandle, o["handle"])
        except DecodeError as e:
            raise ExecutionUnavailable(f"{self.address}: {e.message}") from None
        if (h.environment_id, h.tenant_id, h.run_id, h.lease_epoch) != (
            eid, specification.tenant_id, specification.run_id, specification.lease_epoch
        ):
            # A handle for another sandbox is the service's invariant broken:
            # never used, and the sandbox it names goes.
            try:
                await self._call("DELETE", f"/v1/sandboxes/{h.environment_id}", "destroy", handle=h,
                                 timeout=DESTROY_TIMEOUT_S, expect=204)
            except (AirlockError, OSError):
                pass
            raise SandboxEscapeSuspected(
                f"{self.address}: provision answered a handle for another sandbox ({h.environment_id})"
            )
        return h

    async def destroy(self, environment: EnvironmentHandle) -> None:
        # A malformed handle is the caller's bug, not a sandbox already
        # gone: refused here, outside the idempotence below.
        eid = _eid(environment)
        _handle_header(environment)
        try:
            await self._call(
                "DELETE", f"/v1/sandboxes/{eid}", "destroy",
                handle=environment, timeout=DESTROY_TIMEOUT_S, expect=204,
            )
        except ExecutionRejected:
            # Idempotent: an id already gone is no failure (the service
            # answers 204; a 404 from an older one is the same fact).
            return

    async def cancel(self, environment: EnvironmentHandle) -> bool:
        """Ask the service to kill the command running in ``environment``
        (``CANCELLED``); True when one was running."""
        _, data = await self._call(
            "POST", f"/v1/sandboxes/{_eid(environment)}/cancel", "cancel", handle=environment
        )
        o = self._json(data, "cancel")
        if not isinstance(o, dict) or not isinstance(o.get("cancelled"), bool):
            raise ExecutionUnavailable(f"{self.address}: cancel: an answer that does not decode")
        return bool(o["cancelled"])

    async def execute(
        self,
        environment: EnvironmentHandle,
        command: ExecutionCommand,
        *,
        remaining_budget_ms: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecutionResult:
        """Run ``command``; streamed, so ``on_output`` (or the adapter's)
        sees ``("stdout"|"stderr", bytes)`` as the command writes, exactly
        the result's bytes in order. Cancelling the awaiting task cancels
        the command on the service, and execute then returns its result,
        ``killed_by`` ``CANCELLED`` with the partial output (a second
        cancellation while that result is awaited propagates)."""
        b = remaining_budget_ms
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or not wire.INT64_MIN <= b <= wire.INT64_MAX):
            # The service's own refusal, before anything is sent.
            raise ToolValidationError("execute.remaining_budget_ms: must be an integer or null")
        if not isinstance(command, ExecutionCommand):
            raise ToolValidationError(f"command: must be an ExecutionCommand, not {type(command).__name__}")
        body = (b'{"command":' + _encoded(command, ToolValidationError) + b',"remaining_budget_ms":'
                + wire.dump(remaining_budget_ms).encode() + b',"stream":true}')
        cb = on_output or self.on_output
        reader = asyncio.ensure_future(self._execute_stream(environment, body, command.timeout_seconds, cb))
        try:
            return await asyncio.shield(reader)
        except asyncio.CancelledError:
            if reader.done():
                raise
            task = asyncio.current_task()
            canceller = asyncio.ensure_future(self._cancel_until(environment, reader))
            try:
                result = await asyncio.wait_for(asyncio.shield(reader), CANCEL_RESULT_WAIT_S)
            except TimeoutError:
                # No CANCELLED result in time: the caller's cancellation
                # stands and propagates as one (wait_for's TimeoutError is
                # an OSError, which a caller would take for an errno).
                reader.cancel()
                canceller.cancel()
                await asyncio.gather(reader, canceller, return_exceptions=True)
                raise asyncio.CancelledError(
                    f"{self.address}: execute: cancelled; no CANCELLED result within {CANCEL_RESULT_WAIT_S:g} s"
                ) from None
            except BaseException:
                reader.cancel()
                canceller.cancel()
                await asyncio.gather(reader, canceller, return_exceptions=True)
                raise
            finally:
                if not canceller.done():
                    canceller.cancel()
                await asyncio.gather(canceller, return_exceptions=True)
            # The cancellation was delivered as the command's end: the
            # task goes on with the CANCELLED result.
            if task is not None:
                task.uncancel()
            return result

    async def _cancel_until(self, environment: EnvironmentHandle, reader: "asyncio.Future[Any]") -> None:
        while not reader.done():
            try:
                if await self.cancel(environment):
                    return
            except (AirlockError, OSError):
                return
            await asyncio.sleep(CANCEL_REPEAT_S)

    async def _execute_stream(
        self, h: EnvironmentHandle, body: bytes, timeout_seconds: int, cb: OutputCallback | None
    ) -> ExecutionResult:
        what = "execute"
        # An absolute URL, parsed once a sandbox: httpx parses and merges a
        # relative one on every call.
        eid = _eid(h)
        headers = {"Airlock-Handle": _handle_header(h), "Content-Type": "application/json"}
        url = self._execute_urls.get(eid)
        if url is None:
            if len(self._execute_urls) >= 1024:
                self._execute_urls.clear()
            url = self._execute_urls[eid] = httpx.URL(f"{self._t.base}/v1/sandboxes/{eid}/execute")
        # Each read has the command's timeout and the margin, and so has
        # the whole stream: events now and then cannot hold it longer.
        limit = timeout_seconds + EXECUTE_MARGIN_S
        timeout = httpx.Timeout(limit, connect=5.0)
        # A scope, not _http.deadline's task: this already runs in a task
        # of its own (execute's reader), and a task more costs an execute
        # about 0.1 ms (bench_python.py). Under httpx's TLS transport the
        # expiry can come out as a raw CancelledError (_http.deadline says
        # why): the scope's own record of expiring tells it from execute
        # cancelling its reader.
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await self._execute_read(url, headers, body, timeout, cb)
        except (TimeoutError, asyncio.CancelledError):
            if not scope.expired():
                raise
            raise ExecutionUnavailable(f"{self.address}: execute: no result within {limit:g} s") from None

    async def _execute_read(
        self, url: httpx.URL, headers: dict[str, str], body: bytes, timeout: httpx.Timeout, cb: OutputCallback | None
    ) -> ExecutionResult:
        what = "execute"
        sent = {"stdout": 0, "stderr": 0}
        dropped = {"stdout": False, "stderr": False}
        try:
            req = self._t.client.build_request("POST", url, content=body, headers=headers, timeout=timeout)
            r = await self._t.client.send(req, stream=True)
            try:
                if r.status_code != 200:
                    data = await read_capped(r, 64 * 1024, f"{self.address}: {what}")
                    if r.status_code < 300:
                        raise ExecutionUnavailable(
                            f"{self.address}: {what}: answered HTTP {r.status_code} where 200 was expected")
                    raise_for(self.address, r.status_code, data, what, self._t.secret)
                total = 0
                buf = bytearray()
                result: ExecutionResult | None = None
                # Read to the body's end (after the result only its last
                # chunk), so the connection is kept for the next call.
                async for chunk in r.aiter_raw():
                    total += len(chunk)
                    if total > STREAM_MAX:
                        raise ExecutionUnavailable(f"{self.address}: {what}: the stream is over {STREAM_MAX} bytes")
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            if len(buf) > JSON_MAX:
                                raise ExecutionUnavailable(f"{self.address}: {what}: a line over {JSON_MAX} bytes")
                            break
                        line = bytes(buf[:nl])
                        del buf[: nl + 1]
                        if result is not None:
                            raise ExecutionUnavailable(f"{self.address}: {what}: a line after the result")
                        result = self._event(line, sent, dropped, cb)
                if buf.strip():
                    if result is not None:
                        raise ExecutionUnavailable(f"{self.address}: {what}: bytes after the result")
                    result = self._event(bytes(buf), sent, dropped, cb)
                if result is not None:
                    return result
            finally:
                await r.aclose()
        except TRANSPORT_ERRORS as e:
            raise transport_failure(self._t, what, e) from None
        raise ExecutionUnavailable(f"{self.address}: {what}: the stream ended without a result")

    def _event(
        self, line: bytes, sent: dict[str, int], dropped: dict[str, bool], cb: OutputCallback | None
    ) -> ExecutionResult | None:
        what = f"{self.address}: execute"
        try:
            ev = wire.load(line)
        except DecodeError as e:
            raise ExecutionUnavailable(f"{what}: a stream line that does not decode: {e.message}") from None
        if not isinstance(ev, dict):
            raise ExecutionUnavailable(f"{what}: a stream line that is not an object")
        kind = ev.get("event")
        if kind == "started":
            return None
        if kind == "output":
            stream, data = ev.get("stream"), ev.get("data")
            if stream not in sent or not isinstance(data, str):
                raise ExecutionUnavailable(f"{what}: an output event that does not decode")
            try:
                raw = base64.b64decode(data, validate=True)
            except ValueError:
                raise ExecutionUnavailable(f"{what}: an output event that is not base64") from None
            if not dropped[stream]:
                sent[stream] += len(raw)
                if cb is not None:
                    _call_back(cb, stream, raw)
            return None
        if kind == "dropped":
            stream = ev.get("stream")
            if stream not in dropped:
                raise ExecutionUnavailable(f"{what}: a dropped event that does not decode")
            dropped[stream] = True
            return None
        if kind == "result":
            try:
                res = wire.from_value(ExecutionResult, ev.get("result"))
            except DecodeError as e:
                raise ExecutionUnavailable(f"{what}: a result that does not decode: {e.message}") from None
            _inside(res.files_changed, f"{what}: files_changed")
            # After a drop, the stream's rest comes from the result, so the
            # callback always sees exactly the result's bytes.
            for stream, data in (("stdout", res.stdout), ("stderr", res.stderr)):
                if sent[stream] > len(data):
                    raise ExecutionUnavailable(f"{what}: more {stream} events than the result holds")
                if cb is not None and sent[stream] < len(data):
                    _call_back(cb, stream, bytes(data[sent[stream]:]))
            return res
        if kind == "error":
            err = ev.get("error")
            try:
                failure = wire.error_from_value(err)
            except DecodeError:
                raise ExecutionUnavailable(f"{what}: an error event that does not decode") from None
            # The service's class as it is; its message with the
            # credential cut out, as raise_for does for an error answer.
            raise type(failure)(f"{what}: {_redact(failure.message, self._t.secret)}")
        raise ExecutionUnavailable(f"{what}: an unknown stream event")

    def workspace(self, environment: EnvironmentHandle) -> "ServiceWorkspace":
        """The ``WorkspaceHandle`` of a sandbox this service holds."""
        return ServiceWorkspace(self, environment)


_ENTRY_KIND = {EntryType.FILE: FileKind.FILE, EntryType.SYMLINK: FileKind.SYMLINK}


def _inside(changes: Sequence[FileChange], what: str) -> None:
    """Every path the service names is one the containment function's
    string rules accept: the wire form (as the C decoder) takes any
    relative path, "../x" included, and a platform joining it to a
    directory of its own would leave the workspace."""
    for c in changes:
        try:
            if resolve(c.path) == ROOT:
                raise WorkspaceEscape("the workspace itself")
        except WorkspaceEscape as e:
            raise ExecutionUnavailable(f"{what}: a path outside the workspace: {e.message}") from None


class ServiceWorkspace:
    """``WorkspaceHandle`` over the service's workspace verbs. Every path
    passes :func:`resolve` here and the whole containment function on the
    service."""

    def __init__(self, env: ServiceEnvironment, handle: EnvironmentHandle) -> None:
        self._env = env
        self._h = handle

    def __repr__(self) -> str:
        return f"ServiceWorkspace({self._h.environment_id!r})"

    @property
    def root(self) -> PurePosixPath:
        return ROOT

    def resolve(self, path: str | PurePosixPath) -> PurePosixPath:
        return resolve(path)

    def _rel(self, path: str) -> str:
        r = resolve(path)
        return "" if r == ROOT else str(r.relative_to(ROOT))

    def _url(self, verb: str, path: str, **extra: int) -> str:
        q = "path=" + _q(self._rel(path))
        for k, v in extra.items():
            q += f"&{k}={int(v)}"
        return f"/v1/sandboxes/{_eid(self._h)}/workspace/{verb}?{q}"

    async def contain(self, path: str) -> PurePosixPath:
        """The whole containment function, on the service (symlinks
        included): the resolved path, or :class:`WorkspaceEscape`."""
        await self._env._call("GET", self._url("contain", path), "workspace contain", handle=self._h,
                              timeout=WORKSPACE_TIMEOUT_S, expect=204)
        return resolve(path)

    async def read(self, path: str, max_bytes: int = READ_MAX) -> bytes:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ToolValidationError(f"max_bytes: must be an integer >= 0 (got {max_bytes!r})")
        cap = min(max_bytes, READ_MAX)
        _, data = await self._env._call(
            "GET", self._url("file", path, max_bytes=cap), "workspace read", handle=self._h,
            timeout=WORKSPACE_TIMEOUT_S, cap=cap,
        )
        return data

    async def write(self, path: str, data: bytes) -> None:
        await self._env._call(
            "PUT", self._url("file", path), "workspace write", handle=self._h, body=bytes(data),
            content_type="application/octet-stream", timeout=WORKSPACE_TIMEOUT_S, expect=204,
        )

    async def entries(self, path: str, max_entries: int = 1000) -> tuple[list[DirEntry], bool]:
        """The listing and whether it was cut (``max_entries``, or 2 MiB of
        path bytes)."""
        n = max(1, min(max_entries, LISTDIR_MAX))
        _, data = await self._env._call(
            "GET", self._url("dir", path, max_entries=n), "workspace listdir", handle=self._h,
            timeout=WORKSPACE_TIMEOUT_S, cap=JSON_MAX,
        )
        o = self._env._json(data, "workspace listdir")
        what = f"{self._env.address}: workspace listdir"
        if not isinstance(o, dict) or not isinstance(o.get("entries"), list) or not isinstance(o.get("truncated"), bool):
            raise ExecutionUnavailable(f"{what}: an answer that does not decode")
        out = []
        for e in o["entries"]:
            try:
                if not isinstance(e, dict) or set(e) != {"path", "type", "size_bytes"}:
                    raise DecodeError("entry")
                p = os.fsdecode(wire.path_from_text(e["path"], "DirEntry", "path"))
                t = EntryType(e["type"])
                size = e["size_bytes"]
                if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    raise DecodeError("size_bytes")
            except (DecodeError, ValueError, TypeError):
                raise ExecutionUnavailable(f"{what}: an entry that does not decode") from None
            out.append(DirEntry(PurePosixPath(p), ChangeKind.CREATED, size, None, _ENTRY_KIND.get(t, FileKind.FILE), t))
        _inside(out, what)
        return out, o["truncated"]

    async def listdir(self, path: str) -> Sequence[DirEntry]:
        return (await self.entries(path))[0]

    async def provenance(self, path: str) -> WorkspaceProvenance:
        _, data = await self._env._call(
            "GET", self._url("provenance", path), "workspace provenance", handle=self._h,
            timeout=WORKSPACE_TIMEOUT_S,
        )
        o = self._env._json(data, "workspace provenance")
        name = o.get("provenance") if isinstance(o, dict) else None
        if not isinstance(name, str) or name not in WorkspaceProvenance.__members__:
            raise ExecutionUnavailable(f"{self._env.address}: workspace provenance: an answer that does not decode")
        return WorkspaceProvenance[name]
