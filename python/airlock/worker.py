"""A client of ``airlock-worker``'s API (docs/worker-api.md): leases, the
tools, and artifacts (uploads hashed before they are sent, downloads whose
SHA-256 is checked against the metadata and the ETag)."""

import base64
import hashlib
import os
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from . import wire
from ._http import TRANSPORT_ERRORS, Client, keep, raise_for, read_capped, transport_failure
from .errors import ArtifactIntegrityError, DecodeError, ExecutionUnavailable
from .types import ArtifactId, ArtifactMetadata, ArtifactRef, RunId, SecretValue, TenantId

JSON_MAX = wire.JSON_INPUT_MAX
SHORT_TIMEOUT_S = 30.0
# A tool call waits for its command: the tool's 300 s ceiling and the
# service's margin (docs/remote.md, "Client timeouts").
TOOL_TIMEOUT_S = 300.0 + 60.0 + 30.0
TRANSFER_TIMEOUT_S = 3600.0
CHUNK = 128 * 1024


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


def _seg(s: str, what: str) -> str:
    if not wire._ID.match(s):
        raise ValueError(f"{what}: must be 1..128 of [A-Za-z0-9_-]")
    return s


def _artifact_id(a: ArtifactRef | StoredArtifact | str) -> str:
    s = a.artifact_id if isinstance(a, (ArtifactRef, StoredArtifact)) else a
    if not wire._UUID7.match(s):
        raise ValueError("artifact_id: must be a lowercase canonical UUIDv7")
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
        super().__init__(address, token, tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file,
                         tls_key_file=tls_key_file)
        self.tenant_id = tenant_id

    async def _call(
        self,
        method: str,
        url: str,
        what: str,
        *,
        body: Any = None,
        timeout: float = SHORT_TIMEOUT_S,
        allow_nul: bool = False,
    ) -> Any:
        content = None if body is None else wire.dump(body).encode()
        headers = {"Content-Type": "application/json"} if content is not None else {}
        status, data = await self._request(method, url, what, headers=headers, content=content, timeout=timeout,
                                           cap=JSON_MAX)
        if status == 204 or not data:
            return None
        return self._decode(data, what, allow_nul)

    def _with_tenant(self, o: dict[str, Any], tenant_id: str | None) -> dict[str, Any]:
        t = tenant_id or self.tenant_id
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
        """Claim (or, at the same epoch, renew) a run's lease."""
        o = await self._call(
            "PUT", f"/v1/runs/{_seg(run_id, 'run_id')}/lease", "lease claim",
            body={"tenant_id": tenant_id, "epoch": epoch, "ttl_seconds": ttl_seconds, "bridge": bridge},
        )
        try:
            return Lease(
                RunId(o["run_id"]), TenantId(o["tenant_id"]), int(o["epoch"]), str(o["outcome"]),
                wire.parse_time(o["expires_at"], "Lease", "expires_at"), bool(o["bridge"]),
            )
        except (KeyError, TypeError, ValueError, DecodeError):
            raise ExecutionUnavailable(f"{self.address}: lease claim: an answer that does not decode") from None

    async def renew(self, lease: Lease, ttl_seconds: int) -> Lease:
        return await self.claim(lease.run_id, lease.tenant_id, lease.epoch, ttl_seconds, bridge=lease.bridge)

    async def release(self, run_id: str, epoch: int, *, tenant_id: str | None = None) -> None:
        q = f"epoch={int(epoch)}"
        t = tenant_id or self.tenant_id
        if t is not None:
            q += "&tenant_id=" + _seg(t, "tenant_id")
        await self._call("DELETE", f"/v1/runs/{_seg(run_id, 'run_id')}/lease?{q}", "lease release")

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
        body = self._with_tenant({"epoch": epoch, **extra, "arguments": arguments}, tenant_id)
        return await self._call(
            "POST", f"/v1/runs/{_seg(run_id, 'run_id')}/tools/{urllib.parse.quote(name, safe='.')}",
            f"tool {name}", body=body, timeout=TOOL_TIMEOUT_S,
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
        extra: dict[str, Any] = {"network_enabled": network_enabled}
        if deadline_ms is not None:
            extra["deadline_ms"] = deadline_ms
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
            raise ValueError("export: exactly one of path and text")
        args: dict[str, Any] = {"path": path} if path is not None else {"text": text}
        if filename is not None:
            args["filename"] = filename
        if media_type is not None:
            args["media_type"] = media_type
        o = await self.call_tool(run_id, "artifact.export", epoch, args, tenant_id=tenant_id)
        return self._ref(o, "artifact.export")

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
        if isinstance(data, bytes):
            digest, size = hashlib.sha256(data).hexdigest(), len(data)
            content: Any = data
        else:
            h = hashlib.sha256()
            with open(data, "rb") as f:
                while b := f.read(1 << 20):
                    h.update(b)
                size = f.tell()
            digest = h.hexdigest()
            content = _file_chunks(os.fspath(data))
        if sha256 is not None:
            digest = sha256
        q = "filename=" + urllib.parse.quote_from_bytes(os.fsencode(filename), safe="")
        q += "&media_type=" + urllib.parse.quote(media_type, safe="/")
        t = tenant_id or self.tenant_id
        if t is not None:
            q += "&tenant_id=" + _seg(t, "tenant_id")
        headers = {"Airlock-Content-SHA256": digest, "Content-Length": str(size),
                   "Content-Type": "application/octet-stream"}
        _, body = await self._request("POST", f"/v1/artifacts?{q}", "artifact upload", headers=headers,
                                      content=content, timeout=TRANSFER_TIMEOUT_S, cap=JSON_MAX)
        try:
            return wire.from_json(ArtifactRef, body)
        except DecodeError as e:
            raise ExecutionUnavailable(f"{self.address}: artifact upload: {e.message}") from None

    def _stored(self, o: Any, what: str) -> StoredArtifact:
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
            return StoredArtifact(ArtifactId(aid), wire.from_value(ArtifactMetadata, rest))
        except (DecodeError, ValueError) as e:
            raise ExecutionUnavailable(f"{self.address}: {what}: an answer that does not decode: {e}") from None

    async def metadata(self, artifact: ArtifactRef | StoredArtifact | str) -> StoredArtifact:
        o = await self._call("GET", f"/v1/artifacts/{_artifact_id(artifact)}", "artifact metadata", allow_nul=True)
        return self._stored(o, "artifact metadata")

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
            q.append(f"limit={int(limit)}")
        t = tenant_id or self.tenant_id
        if t is not None:
            q.append("tenant_id=" + _seg(t, "tenant_id"))
        o = await self._call("GET", "/v1/artifacts" + ("?" + "&".join(q) if q else ""), "artifact list",
                             allow_nul=True)
        if not isinstance(o, dict) or not isinstance(o.get("artifacts"), list):
            raise ExecutionUnavailable(f"{self.address}: artifact list: an answer that does not decode")
        nxt = o.get("next_after")
        return [self._stored(a, "artifact list") for a in o["artifacts"]], nxt if isinstance(nxt, str) else None

    async def delete(self, artifact: ArtifactRef | StoredArtifact | str) -> None:
        await self._call("DELETE", f"/v1/artifacts/{_artifact_id(artifact)}", "artifact delete")

    async def attach(self, run_id: str, artifact: ArtifactRef | StoredArtifact | str, *,
                     tenant_id: str | None = None) -> None:
        t = tenant_id or self.tenant_id
        await self._call(
            "POST", f"/v1/runs/{_seg(run_id, 'run_id')}/artifacts/{_artifact_id(artifact)}/attach",
            "artifact attach", body={"tenant_id": t} if t is not None else None,
        )

    async def open(self, artifact: ArtifactRef | StoredArtifact | str) -> AsyncIterator[bytes]:
        """The artifact's bytes as they arrive. Their SHA-256 is compared
        with the metadata's (and the ETag's) at the end: a difference, or a
        body shorter or longer than the metadata's size, raises
        :class:`ArtifactIntegrityError` after the last piece, so a consumer
        that keeps what it got must keep it only once the iteration ended
        without one (:meth:`download_to` does)."""
        stored = await self.metadata(artifact)
        aid = stored.artifact_id
        want, size = stored.metadata.sha256, stored.metadata.size_bytes
        if isinstance(artifact, ArtifactRef) and artifact.sha256 != want:
            raise ArtifactIntegrityError(
                f"artifact {aid}: the reference says SHA-256 {artifact.sha256}, the metadata {want}")
        return self._content(aid, want, size)

    async def _content(self, aid: str, want: str, size: int) -> AsyncIterator[bytes]:
        what = "artifact download"
        h = hashlib.sha256()
        n = 0
        try:
            req = self._t.client.build_request("GET", f"/v1/artifacts/{aid}/content", timeout=TRANSFER_TIMEOUT_S)
            r = await self._t.client.send(req, stream=True)
            try:
                if r.status_code != 200:
                    body = await read_capped(r, 64 * 1024, f"{self.address}: {what}")
                    raise_for(self.address, r.status_code, body, what)
                etag = r.headers.get("etag")
                if etag != f'"sha256:{want}"':
                    raise ArtifactIntegrityError(
                        f"artifact {aid}: the ETag {etag!r} is not the metadata's SHA-256 {want}")
                async for chunk in r.aiter_raw():
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
        temporary file beside it, renamed; removed on any failure)."""
        stored = await self.metadata(artifact)
        dest = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".airlock-", dir=os.path.dirname(os.path.abspath(dest)))
        try:
            with os.fdopen(fd, "wb") as f:
                async for chunk in await self.open(stored):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, dest)
        except BaseException:
            os.unlink(tmp)
            raise
        return stored


async def _file_chunks(path: str) -> AsyncIterator[bytes]:
    with open(path, "rb") as f:
        while b := f.read(CHUNK):
            yield b
