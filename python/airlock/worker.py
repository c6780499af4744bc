"""A client of ``airlock-worker``'s API (docs/worker-api.md): leases, the
tools, and artifacts (uploads hashed before they are sent, downloads whose
SHA-256 is checked against the metadata and the ETag)."""

import asyncio
import base64
import hashlib
import os
import re
import tempfile
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from . import wire
from ._http import SMALL_MAX, TRANSPORT_ERRORS, Client, deadline, raise_for, read_capped, seal, transport_failure
from .errors import (
    ArtifactIntegrityError,
    DecodeError,
    ExecutionUnavailable,
    SandboxEscapeSuspected,
    ToolValidationError,
)
from .types import ArtifactId, ArtifactMetadata, ArtifactRef, RunId, SecretValue, TenantId

JSON_MAX = wire.JSON_INPUT_MAX
SHORT_TIMEOUT_S = 30.0
# A tool call waits for its command: the tool's 300 s ceiling and the
# service's margin (docs/remote.md, "Client timeouts").
TOOL_TIMEOUT_S = 300.0 + 60.0 + 30.0
# A transfer (an upload, a download) has the worker's own deadline rule
# (docs/worker-api.md): a base and one second per 64 KiB, so a large one
# has the time it needs and a trickle is cut; a stall is cut after
# TRANSFER_STALL_S whatever the size. The base is the worker's 30 s and a
# margin, so the worker's verdict on a slow upload arrives first.
TRANSFER_BASE_S = 60.0
TRANSFER_MIN_RATE = 64 * 1024
TRANSFER_STALL_S = 30.0
CHUNK = 128 * 1024
LEASE_OUTCOMES = ("new", "renewed", "fenced")
# An upload's percent-encoded name: the worker's 16 KiB request head less
# the rest of the head (the request line, a 4 KiB credential, the others).
FILENAME_QUERY_MAX = 10 * 1024
TTL_MAX = 86400
LIST_LIMIT_MAX = 1000


def transfer_seconds(size: int) -> float:
    return TRANSFER_BASE_S + size / TRANSFER_MIN_RATE


@dataclass(frozen=True)
class Lease:
    """A run's lease as the worker answered a claim."""

    run_id: RunId
    tenant_id: TenantId
    epoch: int
    outcome: str  # new, renewed, fenced
    expires_at: datetime
    bridge: bool


@dataclass(frozen=True)
class StoredArtifact:
    """One artifact's metadata as the worker serves it, with its id."""

    artifact_id: ArtifactId
    metadata: ArtifactMetadata


# What goes into a URL is checked before it is put there, with the
# worker's own rules, and refused as the worker would refuse it (its 400 is
# ToolValidationError): a run id, a tenant id and an artifact id have
# grammars with nothing a URL could read as more ("/", "?", "&", "%", "#").


def _seg(s: object, what: str) -> str:
    if not isinstance(s, str) or not wire._ID.match(s):
        raise ToolValidationError(f"{what}: must be 1..128 of [A-Za-z0-9_-]")
    return s


def _int_arg(v: object, what: str, lo: int, hi: int = wire.INT64_MAX) -> int:
    # A bool is an int to Python and a float would be refused only by the
    # JSON encoder: both are refused here, naming the argument.
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ToolValidationError(f"{what}: must be an integer from {lo} to {hi}")
    return v


def _artifact_id(a: ArtifactRef | StoredArtifact | str) -> str:
    s = a.artifact_id if isinstance(a, (ArtifactRef, StoredArtifact)) else a
    if not isinstance(s, str) or not wire._UUID7.match(s):
        raise ToolValidationError("artifact_id: must be a lowercase canonical UUIDv7")
    return s


class WorkerClient(Client):
    """``address`` is ``unix:/path`` or ``HOST:PORT`` (TLS); ``token`` the
    bearer token (None with ``auth_mode: dev``). ``tenant_id`` is sent where
    the API wants it with a token of every tenant."""

    def __init__(
        self,
        address: str,
        token: str | bytes | SecretValue | None = None,
        *,
        tenant_id: str | None = None,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ) -> None:
        sealed = seal(token)
        del token
        super().__init__(address, sealed, tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file,
                         tls_key_file=tls_key_file)
        self.tenant_id = tenant_id

    async def _call(
        self,
        method: str,
        url: str,
        what: str,
        *,
        body: Any = None,
        timeout: float | None = None,
        allow_nul: bool = False,
        expect: int = 200,
        cap: int = SMALL_MAX,
    ) -> Any:
        """One JSON call: the decoded answer (None for a 204, which must
        be empty). ``expect`` is the one success status the route answers;
        ``cap`` what its answer can honestly be."""
        try:
            content = None if body is None else wire.dump(body).encode()
        except (TypeError, DecodeError) as e:
            # A value JSON has no form for (a float, bytes, a set) or a
            # string that is not text (a lone surrogate): the caller's.
            raise ToolValidationError(f"{what}: {e}") from None
        headers = {"Content-Type": "application/json"} if content is not None else {}
        status, data = await self._request(method, url, what, headers=headers, content=content,
                                           timeout=SHORT_TIMEOUT_S if timeout is None else timeout,
                                           cap=cap, expect=expect)
        if status == 204:
            return None
        return self._decode(data, what, allow_nul)

    def _tenant(self, tenant_id: str | None) -> str | None:
        t = tenant_id if tenant_id is not None else self.tenant_id
        return None if t is None else _seg(t, "tenant_id")

    def _with_tenant(self, o: dict[str, Any], tenant_id: str | None) -> dict[str, Any]:
        t = self._tenant(tenant_id)
        if t is not None:
            o["tenant_id"] = t
        return o

    # ---- leases -------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        o = await self._call("GET", "/v1/health", "health")
        if not isinstance(o, dict):
            raise ExecutionUnavailable(f"{self.address}: health: not an object")
        return o

    async def claim(self, run_id: str, tenant_id: str, epoch: int, ttl_seconds: int, *, bridge: bool = False) -> Lease:
        """Claim (or, at the same epoch, renew) a run's lease. An answer
        for another run, tenant or epoch is the worker's invariant broken:
        ``SandboxEscapeSuspected``, never a lease to act on."""
        run_id = _seg(run_id, "run_id")
        tenant_id = _seg(tenant_id, "tenant_id")
        epoch = _int_arg(epoch, "epoch", 0)
        ttl_seconds = _int_arg(ttl_seconds, "ttl_seconds", 1, TTL_MAX)
        if not isinstance(bridge, bool):
            raise ToolValidationError("bridge: must be true or false")
        o = await self._call(
            "PUT", f"/v1/runs/{run_id}/lease", "lease claim",
            body={"tenant_id": tenant_id, "epoch": epoch, "ttl_seconds": ttl_seconds, "bridge": bridge},
        )
        what = f"{self.address}: lease claim"
        try:
            if not isinstance(o, dict) or set(o) - {"expires_at_ms"} != {
                    "run_id", "tenant_id", "epoch", "outcome", "expires_at", "bridge"}:
                raise DecodeError("not the lease shape")
            if (o["outcome"] not in LEASE_OUTCOMES or not isinstance(o["bridge"], bool)
                    or not isinstance(o["run_id"], str) or not isinstance(o["tenant_id"], str)
                    or not isinstance(o["epoch"], int) or isinstance(o["epoch"], bool)
                    or not isinstance(o["expires_at"], str)):
                raise DecodeError("a member's type")
            lease = Lease(
                RunId(o["run_id"]), TenantId(o["tenant_id"]), o["epoch"], o["outcome"],
                wire.parse_time(o["expires_at"], "Lease", "expires_at"), o["bridge"],
            )
        except (TypeError, DecodeError):
            raise ExecutionUnavailable(f"{what}: an answer that does not decode") from None
        if (lease.run_id, lease.tenant_id, lease.epoch, lease.bridge) != (run_id, tenant_id, epoch, bridge):
            raise SandboxEscapeSuspected(
                f"{what}: the worker answered a lease for another run, tenant, epoch or bridge choice "
                f"({lease.run_id}, {lease.tenant_id}, {lease.epoch}, bridge {lease.bridge})")
        return lease

    async def renew(self, lease: Lease, ttl_seconds: int) -> Lease:
        return await self.claim(lease.run_id, lease.tenant_id, lease.epoch, ttl_seconds, bridge=lease.bridge)

    async def release(self, run_id: str, epoch: int, *, tenant_id: str | None = None) -> None:
        q = f"epoch={_int_arg(epoch, 'epoch', 0)}"
        t = self._tenant(tenant_id)
        if t is not None:
            q += "&tenant_id=" + t
        await self._call("DELETE", f"/v1/runs/{_seg(run_id, 'run_id')}/lease?{q}", "lease release", expect=204)

    # ---- tools --------------------------------------------------------------------

    async def tools(self) -> list[dict[str, Any]]:
        o = await self._call("GET", "/v1/tools", "tools")
        if not isinstance(o, dict) or not isinstance(o.get("tools"), list):
            raise ExecutionUnavailable(f"{self.address}: tools: an answer that does not decode")
        return list(o["tools"])

    async def call_tool(
        self, run_id: str, name: str, epoch: int, arguments: dict[str, Any], *,
        tenant_id: str | None = None, **extra: Any,
    ) -> Any:
        """One tool call; the tool's result object."""
        if not isinstance(name, str) or not name:
            raise ToolValidationError("name: must be a tool's name")
        body = self._with_tenant({"epoch": _int_arg(epoch, "epoch", 0), **extra, "arguments": arguments}, tenant_id)
        # A result holds two 1 MiB excerpts (escaped up to six times) and
        # up to 10,000 files_changed: the JSON cap, not the small one.
        return await self._call(
            "POST", f"/v1/runs/{_seg(run_id, 'run_id')}/tools/{urllib.parse.quote(name, safe='.')}",
            f"tool {name}", body=body, timeout=TOOL_TIMEOUT_S, cap=JSON_MAX,
        )

    async def run_command(
        self,
        run_id: str,
        epoch: int,
        command: Sequence[str],
        *,
        working_directory: str = ".",
        timeout_seconds: int | None = None,
        network_enabled: bool = False,
        deadline_ms: int | None = None,
        tenant_id: str | None = None,
    ) -> dict[str, Any]:
        """``sandbox.run_command``: the specification's result object
        (``stdout``/``stderr`` as text, ``*_artifact`` refs of output kept
        whole)."""
        # A string is sent as it is: the worker refuses it with the message
        # that teaches the vector form.
        vec: Any = command if isinstance(command, str) else list(command)
        args: dict[str, Any] = {"command": vec, "working_directory": working_directory}
        if timeout_seconds is not None:
            args["timeout_seconds"] = timeout_seconds
        if not isinstance(network_enabled, bool):
            raise ToolValidationError("network_enabled: must be true or false")
        extra: dict[str, Any] = {"network_enabled": network_enabled}
        if deadline_ms is not None:
            extra["deadline_ms"] = _int_arg(deadline_ms, "deadline_ms", 0)
        o = await self.call_tool(run_id, "sandbox.run_command", epoch, args, tenant_id=tenant_id, **extra)
        if not isinstance(o, dict):
            raise ExecutionUnavailable(f"{self.address}: sandbox.run_command: an answer that does not decode")
        return o

    async def export(
        self,
        run_id: str,
        epoch: int,
        *,
        path: str | None = None,
        text: str | None = None,
        filename: str | None = None,
        media_type: str | None = None,
        tenant_id: str | None = None,
    ) -> ArtifactRef:
        """``artifact.export``: one workspace file (``path``) or ``text``."""
        if (path is None) == (text is None):
            raise ToolValidationError("export: exactly one of path and text")
        args: dict[str, Any] = {"path": path} if path is not None else {"text": text}
        if filename is not None:
            args["filename"] = filename
        if media_type is not None:
            args["media_type"] = media_type
        o = await self.call_tool(run_id, "artifact.export", epoch, args, tenant_id=tenant_id)
        ref = self._ref(o, "artifact.export")
        if text is not None and isinstance(text, str):
            # The text's bytes are known here: a reference to other bytes
            # is refused before anyone relies on it.
            raw = text.encode("utf-8", "surrogatepass")
            _check_ref(ref, hashlib.sha256(raw).hexdigest(), len(raw), "artifact.export")
        return ref

    def _ref(self, o: Any, what: str) -> ArtifactRef:
        try:
            return wire.from_value(ArtifactRef, o)
        except DecodeError as e:
            raise ExecutionUnavailable(f"{self.address}: {what}: {e.message}") from None

    # ---- artifacts ----------------------------------------------------------------

    async def upload(
        self,
        data: bytes | str | os.PathLike[str],
        filename: str,
        media_type: str = "application/octet-stream",
        *,
        tenant_id: str | None = None,
        sha256: str | None = None,
    ) -> ArtifactRef:
        """Upload bytes, or the file at a path (hashed first, then streamed
        with its length; a file that changes in between is refused by the
        worker as ``ArtifactIntegrityError``). ``sha256``, when given, is
        the digest the bytes must have (sent instead of the one computed
        here, so the worker compares the bytes with it)."""
        if sha256 is not None and (not isinstance(sha256, str) or not _SHA256_ARG.match(sha256)):
            # It goes into a header line: refused here, as the worker would.
            raise ToolValidationError("sha256: must be 64 hex digits")
        if not isinstance(filename, str) or not filename:
            raise ToolValidationError("filename: must be a non-empty name")
        try:
            name = urllib.parse.quote_from_bytes(os.fsencode(filename), safe="")
        except UnicodeEncodeError:
            raise ToolValidationError("filename: holds a lone surrogate that is no byte of a name") from None
        if len(name) > FILENAME_QUERY_MAX:
            # The worker's request head (16 KiB) bounds an upload's name;
            # a longer one comes from an export (docs/worker-api.md).
            raise ToolValidationError(
                f"filename: {len(name)} bytes percent-encoded, over the {FILENAME_QUERY_MAX} an upload's "
                "request head holds (the worker's 16 KiB head)")
        if not isinstance(media_type, str) or not wire._MEDIA.match(media_type):
            raise ToolValidationError("media_type: must be type/subtype (RFC 6838 names, no parameters)")
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            computed, size = hashlib.sha256(data).hexdigest(), len(data)
            content: Any = data
        else:
            h = hashlib.sha256()
            with open(data, "rb") as f:
                while b := f.read(1 << 20):
                    h.update(b)
                size = f.tell()
            computed = h.hexdigest()
            content = _file_chunks(os.fspath(data), size, computed)
        digest = computed if sha256 is None else sha256.lower()
        q = "filename=" + name
        q += "&media_type=" + urllib.parse.quote(media_type, safe="/")
        t = self._tenant(tenant_id)
        if t is not None:
            q += "&tenant_id=" + t
        headers = {"Airlock-Content-SHA256": digest, "Content-Length": str(size),
                   "Content-Type": "application/octet-stream"}
        _, body = await self._request("POST", f"/v1/artifacts?{q}", "artifact upload", headers=headers,
                                      content=content, timeout=TRANSFER_STALL_S, total=transfer_seconds(size),
                                      cap=SMALL_MAX, expect=201)
        try:
            ref = wire.from_value(ArtifactRef, self._decode(body, "artifact upload"))
        except DecodeError as e:
            raise ExecutionUnavailable(f"{self.address}: artifact upload: {e.message}") from None
        # The worker stored what it hashed; a reference to other bytes (or
        # a length other than the one sent) is refused here.
        _check_ref(ref, digest, size, "artifact upload")
        if ref.media_type != media_type:
            raise ExecutionUnavailable(
                f"{self.address}: artifact upload: the reference names media type {ref.media_type}, "
                f"not the {media_type} sent")
        return ref

    def _stored(self, o: Any, what: str, want_id: str | None = None) -> StoredArtifact:
        try:
            if not isinstance(o, dict) or "artifact_id" not in o or "filename_base64" not in o:
                raise DecodeError("not the metadata shape")
            rest = dict(o)
            aid = rest.pop("artifact_id")
            raw = base64.b64decode(rest.pop("filename_base64"), validate=True)
            # The name's exact bytes (any bytes: it is metadata, never a path).
            rest["filename"] = raw.decode("utf-8", "surrogateescape")
            if not isinstance(aid, str) or not wire._UUID7.match(aid):
                raise DecodeError("artifact_id")
            stored = StoredArtifact(ArtifactId(aid), wire.from_value(ArtifactMetadata, rest))
        except (DecodeError, ValueError, TypeError) as e:
            raise ExecutionUnavailable(f"{self.address}: {what}: an answer that does not decode: {e}") from None
        if want_id is not None and stored.artifact_id != want_id:
            # Another artifact's metadata: its bytes would be fetched and
            # checked against its own digest, and pass.
            raise ArtifactIntegrityError(
                f"{self.address}: {what}: asked for artifact {want_id}, answered {stored.artifact_id}")
        return stored

    async def metadata(self, artifact: ArtifactRef | StoredArtifact | str) -> StoredArtifact:
        aid = _artifact_id(artifact)
        o = await self._call("GET", f"/v1/artifacts/{aid}", "artifact metadata", allow_nul=True)
        return self._stored(o, "artifact metadata", aid)

    async def list(
        self, *, run_id: str | None = None, after: str | None = None, limit: int | None = None,
        tenant_id: str | None = None,
    ) -> tuple[list[StoredArtifact], str | None]:
        """One page of the tenant's artifacts and the ``after`` of the next."""
        q = []
        if run_id is not None:
            q.append("run_id=" + _seg(run_id, "run_id"))
        if after is not None:
            q.append("after=" + _artifact_id(after))
        if limit is not None:
            q.append(f"limit={_int_arg(limit, 'limit', 1, LIST_LIMIT_MAX)}")
        t = self._tenant(tenant_id)
        if t is not None:
            q.append("tenant_id=" + t)
        o = await self._call("GET", "/v1/artifacts" + ("?" + "&".join(q) if q else ""), "artifact list",
                             allow_nul=True, cap=JSON_MAX)
        what = f"{self.address}: artifact list"
        if not isinstance(o, dict) or not isinstance(o.get("artifacts"), list):
            raise ExecutionUnavailable(f"{what}: an answer that does not decode")
        nxt = o.get("next_after")
        if nxt is not None and (not isinstance(nxt, str) or not wire._UUID7.match(nxt)):
            raise ExecutionUnavailable(f"{what}: next_after is not an artifact id")
        if len(o["artifacts"]) > (limit or LIST_LIMIT_MAX):
            raise ExecutionUnavailable(f"{what}: more artifacts than the page's limit")
        return [self._stored(a, "artifact list") for a in o["artifacts"]], nxt

    async def delete(self, artifact: ArtifactRef | StoredArtifact | str) -> None:
        await self._call("DELETE", f"/v1/artifacts/{_artifact_id(artifact)}", "artifact delete", expect=204)

    async def attach(self, run_id: str, artifact: ArtifactRef | StoredArtifact | str, *,
                     tenant_id: str | None = None) -> None:
        t = self._tenant(tenant_id)
        await self._call(
            "POST", f"/v1/runs/{_seg(run_id, 'run_id')}/artifacts/{_artifact_id(artifact)}/attach",
            "artifact attach", body={"tenant_id": t} if t is not None else None, expect=204,
        )

    async def open(self, artifact: ArtifactRef | StoredArtifact | str) -> AsyncIterator[bytes]:
        """The artifact's bytes as they arrive. Their SHA-256 and length are
        compared with the metadata's (and an ``ArtifactRef``'s, and the
        ETag's) at the end: a difference, or a body longer than the
        metadata's size, raises :class:`ArtifactIntegrityError` after the
        last piece, so a consumer that keeps what it got must keep it only
        once the iteration ended without one (:meth:`download_to` does).
        The transfer has a deadline of 60 s and one second per 64 KiB,
        and a stall of 30 s ends it (``ExecutionUnavailable``)."""
        stored = await self._expected(artifact)
        return self._content(stored.artifact_id, stored.metadata.sha256, stored.metadata.size_bytes)

    async def _expected(self, artifact: ArtifactRef | StoredArtifact | str) -> StoredArtifact:
        """The metadata the bytes must match: the worker's, which must
        agree with what the caller holds (an ``ArtifactRef``'s digest and
        size, a ``StoredArtifact``'s)."""
        stored = await self.metadata(artifact)
        if isinstance(artifact, ArtifactRef):
            held = (artifact.sha256, artifact.size_bytes)
        elif isinstance(artifact, StoredArtifact):
            held = (artifact.metadata.sha256, artifact.metadata.size_bytes)
        else:
            return stored
        if held != (stored.metadata.sha256, stored.metadata.size_bytes):
            raise ArtifactIntegrityError(
                f"artifact {stored.artifact_id}: the caller's reference says SHA-256 {held[0]} and {held[1]} "
                f"bytes, the worker's metadata {stored.metadata.sha256} and {stored.metadata.size_bytes} bytes")
        return stored

    async def _content(self, aid: str, want: str, size: int) -> AsyncGenerator[bytes, None]:
        what = "artifact download"
        h = hashlib.sha256()
        n = 0
        loop = asyncio.get_running_loop()
        limit = transfer_seconds(size)
        end = loop.time() + limit
        try:
            try:
                req = self._t.client.build_request("GET", f"/v1/artifacts/{aid}/content", timeout=TRANSFER_STALL_S)
                r = await deadline(self._t.client.send(req, stream=True), limit)
            except TimeoutError:
                raise ExecutionUnavailable(f"{self.address}: {what}: no answer within {limit:g} s") from None
            try:
                if r.status_code != 200:
                    body = await read_capped(r, 64 * 1024, f"{self.address}: {what}")
                    if r.status_code < 300:
                        raise ExecutionUnavailable(
                            f"{self.address}: {what}: answered HTTP {r.status_code} where 200 was expected")
                    raise_for(self.address, r.status_code, body, what, self._t.secret)
                etag = r.headers.get("etag")
                if etag != f'"sha256:{want}"':
                    raise ArtifactIntegrityError(
                        f"artifact {aid}: the ETag {etag!r} is not the metadata's SHA-256 {want}")
                declared = r.headers.get("content-length")
                if declared is not None and declared != str(size):
                    raise ArtifactIntegrityError(
                        f"artifact {aid}: the answer declares {declared!r} bytes, the metadata {size}")
                # The deadline is checked after each read (a read that
                # gets nothing is cut by the stall timeout): no timer armed
                # across a yield, where the consumer's own code runs, and
                # no cancellation inside httpx's stream.
                async for chunk in r.aiter_raw():
                    if loop.time() > end:
                        raise ExecutionUnavailable(
                            f"{self.address}: {what}: {n} of {size} bytes within {limit:g} s")
                    n += len(chunk)
                    if n > size:
                        raise ArtifactIntegrityError(f"artifact {aid}: more than its {size} bytes arrived")
                    h.update(chunk)
                    yield chunk
            finally:
                await r.aclose()
        except TRANSPORT_ERRORS as e:
            raise transport_failure(self._t, what, e) from None
        got = h.hexdigest()
        if n != size or got != want:
            raise ArtifactIntegrityError(
                f"artifact {aid}: received {n} bytes with SHA-256 {got}; the artifact is {size} bytes with SHA-256 {want}")

    async def download_to(self, artifact: ArtifactRef | StoredArtifact | str, path: str | os.PathLike[str]) -> StoredArtifact:
        """Write the artifact to ``path`` only once its SHA-256 matched (a
        temporary file beside it, renamed; removed on any failure,
        cancellation included). An ``ArtifactRef`` or ``StoredArtifact``
        given is held to the worker's metadata as :meth:`open` holds it."""
        stored = await self._expected(artifact)
        dest = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".airlock-", dir=os.path.dirname(os.path.abspath(dest)))
        try:
            with os.fdopen(fd, "wb") as f:
                content = self._content(stored.artifact_id, stored.metadata.sha256, stored.metadata.size_bytes)
                try:
                    async for chunk in content:
                        f.write(chunk)
                finally:
                    await content.aclose()
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, dest)
        except BaseException:
            os.unlink(tmp)
            raise
        return stored


_SHA256_ARG = re.compile(r"[0-9a-fA-F]{64}\Z")


def _check_ref(ref: ArtifactRef, sha256: str, size: int, what: str) -> None:
    if (ref.sha256, ref.size_bytes) != (sha256.lower(), size):
        raise ArtifactIntegrityError(
            f"{what}: the worker answered SHA-256 {ref.sha256} and {ref.size_bytes} bytes for "
            f"{size} bytes with SHA-256 {sha256.lower()}")


async def _file_chunks(path: str, size: int, digest: str) -> AsyncIterator[bytes]:
    """The file's bytes, exactly the ``size`` announced: a file that grew or
    shrank since it was hashed is ArtifactIntegrityError here (the worker
    compares the digest of a file rewritten in place)."""
    n = 0
    with open(path, "rb") as f:
        while b := f.read(min(CHUNK, size - n + 1)):
            n += len(b)
            if n > size:
                raise ArtifactIntegrityError(
                    f"artifact upload: {path!r} grew past the {size} bytes hashed (SHA-256 {digest}) while it was sent")
            yield b
    if n != size:
        raise ArtifactIntegrityError(
            f"artifact upload: {path!r} shrank to {n} of the {size} bytes hashed (SHA-256 {digest}) while it was sent")
