"""The worker's API through airlock.WorkerClient, against a real
airlock-worker in front of a real ``airlock serve`` (fake; native for the
export of a file a command wrote)."""

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

import airlock
from airlock import WorkerClient

from . import servers

T = TypeVar("T")


@pytest.fixture(scope="module")
def fake() -> Iterator[servers.Stack]:
    with servers.stack("fake", worker=True) as st:
        yield st


@pytest.fixture(scope="module")
def native() -> Iterator[servers.Stack]:
    servers.require_native()
    with servers.stack("native", worker=True) as st:
        yield st


def run(st: servers.Stack, body: Callable[[WorkerClient], Awaitable[T]]) -> T:
    async def main() -> T:
        assert st.worker_address
        async with WorkerClient(st.worker_address) as w:
            return await body(w)

    return asyncio.run(main())


def test_health_and_tools(fake: servers.Stack) -> None:
    async def body(w: WorkerClient) -> None:
        h = await w.health()
        assert h["status"] == "ok" and h["auth_mode"] == "dev"
        tools = {t["name"]: t for t in await w.tools()}
        assert set(tools) == {"sandbox.run_command", "artifact.export"}
        assert tools["sandbox.run_command"]["classification"]["side_effect"] == "CODE_EXECUTION"
        assert tools["sandbox.run_command"]["allow_parallel"] is False

    run(fake, body)


def test_lease_claim_renew_fence_release(fake: servers.Stack) -> None:
    async def body(w: WorkerClient) -> None:
        a = await w.claim("run-lease", "dev", 1, 30)
        assert (a.outcome, a.epoch, a.tenant_id) == ("new", 1, "dev")
        b = await w.renew(a, 60)
        assert b.outcome == "renewed" and b.expires_at >= a.expires_at
        c = await w.claim("run-lease", "dev", 2, 30)
        assert c.outcome == "fenced"
        with pytest.raises(airlock.ExecutionRejected):
            await w.claim("run-lease", "dev", 1, 30)  # a lower epoch
        with pytest.raises(airlock.ExecutionRejected):
            await w.release("run-lease", 1)
        await w.release("run-lease", 2)
        await w.release("run-lease", 2)  # over already: 204
        with pytest.raises(airlock.ToolValidationError):
            await w.claim("run-lease", "dev", 3, 0)

    run(fake, body)


def test_run_command_under_a_lease(fake: servers.Stack) -> None:
    async def body(w: WorkerClient) -> None:
        with pytest.raises(airlock.ExecutionRejected):
            await w.run_command("run-tool", 1, ["true"])  # no lease
        await w.claim("run-tool", "dev", 1, 30)
        r = await w.run_command("run-tool", 1, ["true"], timeout_seconds=5)
        assert r["exit_code"] == 0 and r["killed_by"] is None and r["files_changed"] == []
        with pytest.raises(airlock.ToolValidationError) as e:
            await w.run_command("run-tool", 1, "ls -l")
        assert "[" in str(e.value)  # the message teaches the vector form
        with pytest.raises(airlock.WorkspaceEscape):
            await w.run_command("run-tool", 1, ["true"], working_directory="../x")
        with pytest.raises(airlock.ExecutionRejected):
            await w.run_command("run-tool", 2, ["true"])  # another epoch
        await w.release("run-tool", 1)

    run(fake, body)


def test_export_text_and_artifact_routes(fake: servers.Stack) -> None:
    async def body(w: WorkerClient) -> None:
        await w.claim("run-art", "dev", 1, 30)
        text = "# Summary\nh\u00e9llo\n" * 1000
        ref = await w.export("run-art", 1, text=text, filename="summary.md", media_type="text/markdown")
        assert ref.sha256 == hashlib.sha256(text.encode()).hexdigest()
        assert ref.size_bytes == len(text.encode()) and ref.media_type == "text/markdown"
        again = await w.export("run-art", 1, text=text, filename="summary.md", media_type="text/markdown")
        assert again == ref  # idempotent
        stored = await w.metadata(ref)
        m = stored.metadata
        assert (m.origin, m.trust, m.filename, m.run_id) == (
            airlock.ArtifactOrigin.MODEL_OUTPUT, airlock.TrustLevel.EXTERNAL_UNTRUSTED, "summary.md", "run-art")
        got = b"".join([c async for c in await w.open(ref)])
        assert got == text.encode()
        page, nxt = await w.list(run_id="run-art")
        assert [a.artifact_id for a in page] == [ref.artifact_id] and nxt is None
        await w.delete(ref)
        with pytest.raises(airlock.ExecutionRejected):
            await w.metadata(ref)
        await w.release("run-art", 1)

    run(fake, body)


def test_upload_download_and_attach(fake: servers.Stack, tmp_path: "os.PathLike[str]") -> None:
    big = os.urandom(3 << 20)
    src = os.path.join(tmp_path, "big.bin")
    with open(src, "wb") as f:
        f.write(big)
    name = os.fsdecode(b"../../etc/passwd \xff\xe9 \xe2\x80\xae.txt")

    async def body(w: WorkerClient) -> None:
        ref = await w.upload(src, name, "application/octet-stream")
        assert ref.sha256 == hashlib.sha256(big).hexdigest() and ref.size_bytes == len(big)
        stored = await w.metadata(ref)
        assert stored.metadata.filename == name  # the exact bytes, never a path
        assert stored.metadata.origin == airlock.ArtifactOrigin.UPLOAD and stored.metadata.run_id is None
        dest = os.path.join(tmp_path, "out.bin")
        await w.download_to(ref, dest)
        with open(dest, "rb") as f:
            assert f.read() == big
        small = await w.upload(b"", "empty")
        assert small.size_bytes == 0
        assert b"".join([c async for c in await w.open(small)]) == b""
        await w.claim("run-up", "dev", 1, 30)
        await w.attach("run-up", ref)
        assert (await w.metadata(ref)).metadata.run_id == "run-up"
        with pytest.raises(airlock.ArtifactIntegrityError):
            await w.upload(b"these bytes", "x", sha256="0" * 64)
        await w.release("run-up", 1)

    run(fake, body)


def test_a_corrupted_object_fails_the_download_loudly(fake: servers.Stack, tmp_path: "os.PathLike[str]") -> None:
    data = b"the bytes that were exported\n" * 5000

    async def body(w: WorkerClient) -> None:
        ref = await w.upload(data, "victim.txt", "text/plain")
        # The object on disk, found by its id under the store's directory.
        objs = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(fake.dir, "artifacts"))
                for f in fs if f == ref.artifact_id]
        assert len(objs) == 1, objs
        with open(objs[0], "r+b") as f:
            f.seek(1000)
            f.write(b"X")
        dest = os.path.join(tmp_path, "victim.txt")
        with pytest.raises(airlock.ArtifactIntegrityError) as e:
            await w.download_to(ref, dest)
        assert ref.sha256 in str(e.value)
        assert not os.path.exists(dest)
        assert [n for n in os.listdir(tmp_path) if n.startswith(".airlock-")] == []
        with pytest.raises(airlock.ArtifactIntegrityError):
            async for _ in await w.open(ref):
                pass

    run(fake, body)


def test_every_connection_is_closed(fake: servers.Stack) -> None:
    async def cycle() -> None:
        assert fake.worker_address
        async with WorkerClient(fake.worker_address) as w:
            await w.health()
            ref = await w.upload(b"x" * 100000, "f")
            async for _ in await w.open(ref):
                pass
            await w.delete(ref)
            with pytest.raises(airlock.ExecutionRejected):
                await w.metadata(ref)

    asyncio.run(cycle())
    before = len(os.listdir("/proc/self/fd"))
    asyncio.run(cycle())
    assert len(os.listdir("/proc/self/fd")) == before


def test_export_of_a_file_a_command_wrote(native: servers.Stack) -> None:
    async def body(w: WorkerClient) -> None:
        await w.claim("run-exp", "dev", 1, 60)
        r = await w.run_command("run-exp", 1, ["sh", "-c", "head -c 3000000 /dev/urandom > out.bin; sha256sum out.bin"])
        assert r["exit_code"] == 0, r
        want = r["stdout"].split()[0]
        ref = await w.export("run-exp", 1, path="out.bin")
        assert ref.sha256 == want and ref.size_bytes == 3000000
        m = (await w.metadata(ref)).metadata
        assert (m.origin, m.trust) == (airlock.ArtifactOrigin.SANDBOX_EXPORT, airlock.TrustLevel.EXTERNAL_UNTRUSTED)
        h = hashlib.sha256()
        async for c in await w.open(ref):
            h.update(c)
        assert h.hexdigest() == want
        await w.release("run-exp", 1)

    run(native, body)


# ---- auth_mode: tokens ----------------------------------------------------------------

TOKEN_A = "tok-a-" + "a1" * 16
TOKEN_B = "tok-b-" + "b2" * 16
TOKEN_ALL = "tok-all-" + "c3" * 16


@pytest.fixture(scope="module")
def tokens() -> Iterator[servers.Stack]:
    with servers.stack("fake", worker=True,
                       tokens=[(TOKEN_A, "tenant-a"), (TOKEN_B, "tenant-b"), (TOKEN_ALL, "*")]) as st:
        yield st


def as_client(st: servers.Stack, token: str | airlock.SecretValue | None,
              body: Callable[[WorkerClient], Awaitable[T]], tenant_id: str | None = None) -> T:
    async def main() -> T:
        assert st.worker_address
        async with WorkerClient(st.worker_address, token, tenant_id=tenant_id) as w:
            return await body(w)

    return asyncio.run(main())


def test_tokens_a_wrong_or_missing_token_is_refused(tokens: servers.Stack) -> None:
    for token in ("tok-wrong-" + "d4" * 16, TOKEN_A[:-1], None):
        async def body(w: WorkerClient) -> None:
            for call in (w.health(), w.claim("run-x", "tenant-a", 1, 30), w.upload(b"x", "f")):
                with pytest.raises(airlock.ConfigurationError, match="refused the credential") as e:
                    await call
                assert not airlock.is_retriable(e.value)
                assert token is None or token not in str(e.value)

        as_client(tokens, token, body)


def test_tokens_a_tenants_token_acts_for_its_tenant_only(tokens: servers.Stack) -> None:
    async def a(w: WorkerClient) -> tuple[str, str]:
        assert (await w.health())["auth_mode"] == "tokens"
        lease = await w.claim("run-a", "tenant-a", 1, 30)
        assert (lease.tenant_id, lease.outcome) == ("tenant-a", "new")
        r = await w.run_command("run-a", 1, ["true"])
        assert r["exit_code"] == 0
        with pytest.raises(airlock.ExecutionRejected):
            await w.claim("run-a2", "tenant-b", 1, 30)  # another tenant's name: 403
        with pytest.raises(airlock.ExecutionRejected):
            await w.release("run-a", 1, tenant_id="tenant-b")
        ref = await w.export("run-a", 1, text="tenant a's text")
        up = await w.upload(b"tenant a's upload", "a.txt", "text/plain")
        assert (await w.metadata(up)).metadata.tenant_id == "tenant-a"
        return ref.artifact_id, up.artifact_id

    exported, uploaded = as_client(tokens, airlock.SecretValue(TOKEN_A), a)

    async def b(w: WorkerClient) -> None:
        # Tenant a's run and artifacts do not exist for tenant b.
        for call in (w.run_command("run-a", 1, ["true"]), w.claim("run-a", "tenant-b", 2, 30),
                     w.metadata(exported), w.open(uploaded), w.delete(uploaded), w.attach("run-b", uploaded)):
            with pytest.raises(airlock.ExecutionRejected):
                await call
        page, _ = await w.list()
        assert page == []

    as_client(tokens, TOKEN_B, b)

    async def release(w: WorkerClient) -> None:
        await w.release("run-a", 1)
        got = b"".join([c async for c in await w.open(uploaded)])
        assert got == b"tenant a's upload"

    as_client(tokens, TOKEN_A, release)


def test_tokens_an_every_tenant_token_needs_a_tenant(tokens: servers.Stack) -> None:
    async def without(w: WorkerClient) -> None:
        with pytest.raises(airlock.ToolValidationError, match="tenant_id"):
            await w.upload(b"x", "f")
        await w.claim("run-all", "tenant-a", 1, 30)  # the claim's body names it
        for call in (w.release("run-all", 1), w.run_command("run-all", 1, ["true"])):
            with pytest.raises(airlock.ToolValidationError, match="tenant_id"):
                await call
        # Named per call, it acts for that tenant.
        r = await w.run_command("run-all", 1, ["true"], tenant_id="tenant-a")
        assert r["exit_code"] == 0
        await w.release("run-all", 1, tenant_id="tenant-a")

    as_client(tokens, TOKEN_ALL, without)

    async def with_tenant(w: WorkerClient) -> None:
        lease = await w.claim("run-all-b", "tenant-b", 1, 30)
        assert lease.tenant_id == "tenant-b"
        ref = await w.upload(b"for b", "b.txt", "text/plain")
        stored = await w.metadata(ref)
        assert stored.metadata.tenant_id == "tenant-b"
        await w.attach("run-all-b", ref)
        page, _ = await w.list(run_id="run-all-b")
        assert [s.artifact_id for s in page] == [ref.artifact_id]
        # Tenant a's run is not tenant b's: 404 under this client's tenant.
        with pytest.raises(airlock.ExecutionRejected):
            await w.run_command("run-all-b", 1, ["true"], tenant_id="tenant-a")
        await w.release("run-all-b", 1)

    as_client(tokens, TOKEN_ALL, with_tenant, tenant_id="tenant-b")

    async def b_sees_it(w: WorkerClient) -> None:
        page, _ = await w.list(run_id="run-all-b")
        assert len(page) == 1 and page[0].metadata.tenant_id == "tenant-b"

    as_client(tokens, TOKEN_B, b_sees_it)
