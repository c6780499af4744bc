"""The ExecutionEnvironment and WorkspaceHandle contract, in Python,
against real ``airlock serve`` processes (fake and native). The assertions
are the port's semantics (the specification, "One contract suite, four
adapters"; tests/test_exec_contract.c is the C suite). The fake runs
nothing and ``airlock serve`` cannot script it, so the tests whose
assertions need a command that really runs are the native ones
(``NATIVE``); every other test runs against both."""

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Any, TypeVar

import httpx
import pytest

import airlock
from airlock import ServiceEnvironment

from . import servers

T = TypeVar("T")
MECHANISMS = ["fake", "native"]


@pytest.fixture(scope="module", params=MECHANISMS)
def stack(request: pytest.FixtureRequest) -> Iterator[servers.Stack]:
    if request.param == "native":
        servers.require_native()
    with servers.stack(request.param) as st:
        yield st


@pytest.fixture(scope="module")
def native() -> Iterator[servers.Stack]:
    servers.require_native()
    with servers.stack("native") as st:
        yield st


def spec(st: servers.Stack, run: str = "run-1", tenant: str = "tenant-a", epoch: int = 1) -> airlock.EnvironmentSpec:
    return airlock.EnvironmentSpec(
        tenant_id=airlock.TenantId(tenant),
        run_id=airlock.RunId(run),
        lease_epoch=epoch,
        image_digest=st.image,
        limits=airlock.ResourceLimits(1000, 256 << 20, 64, 64 << 20, 10000, 60),
        egress=airlock.EgressPolicy(airlock.EgressMode.DENY, ()),
        environment={"HOME": "/workspace", "PATH": "/usr/bin:/bin"},
        bridge=None,
    )


def cmd(*argv: str, timeout: int = 30, stdin: bytes | None = None, cap: int = 1 << 20) -> airlock.ExecutionCommand:
    return airlock.ExecutionCommand(argv, PurePosixPath("."), timeout, stdin, cap)


def run(st: servers.Stack, body: Callable[[ServiceEnvironment], Awaitable[T]]) -> T:
    async def main() -> T:
        async with ServiceEnvironment(st.service_address, st.service_token) as env:
            return await body(env)

    return asyncio.run(main())


# ---- both mechanisms ------------------------------------------------------------


def test_provision_execute_destroy(stack: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        port: airlock.ExecutionEnvironment = env  # the adapter is the port
        assert port is env
        s = spec(stack)
        h = await env.provision(s)
        assert (h.tenant_id, h.run_id, h.lease_epoch) == (s.tenant_id, s.run_id, s.lease_epoch)
        assert h.environment_id.startswith("env_")
        assert h.created_at <= h.expires_at
        r = await env.execute(h, cmd("true"))
        assert r.exit_code == 0 and r.killed_by is None and not r.timed_out
        await env.destroy(h)
        await env.destroy(h)  # idempotent
        with pytest.raises(airlock.ExecutionRejected):
            await env.execute(h, cmd("true"))

    run(stack, body)


@pytest.mark.parametrize("field", ["tenant_id", "run_id", "lease_epoch", "created_at", "expires_at"])
def test_forged_handle_raises_and_destroys(stack: servers.Stack, field: str) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(stack))
        value: Any = {
            "tenant_id": "tenant-b", "run_id": "run-x", "lease_epoch": h.lease_epoch + 1,
            "created_at": h.created_at - timedelta(seconds=1), "expires_at": h.expires_at + timedelta(seconds=1),
        }[field]
        forged = dataclasses.replace(h, **{field: value})
        sent: list[httpx.Request] = []

        async def count(req: httpx.Request) -> None:
            sent.append(req)

        env._t.client.event_hooks["request"].append(count)
        with pytest.raises(airlock.SandboxEscapeSuspected) as e:
            await env.execute(forged, cmd("true"))
        # Never a retry: one request, and the failure says so.
        assert len(sent) == 1
        assert not airlock.is_retriable(e.value)
        env._t.client.event_hooks["request"].remove(count)
        # The sandbox was destroyed: its genuine handle is refused now.
        with pytest.raises(airlock.ExecutionRejected):
            await env.execute(h, cmd("true"))
        await env.destroy(h)

    run(stack, body)


def test_an_id_naming_nothing_is_rejected(stack: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(stack))
        last = h.environment_id[-1]
        other = dataclasses.replace(h, environment_id=h.environment_id[:-1] + ("1" if last == "0" else "0"))
        with pytest.raises(airlock.ExecutionRejected):
            await env.execute(other, cmd("true"))
        r = await env.execute(h, cmd("true"))  # untouched
        assert r.exit_code == 0
        await env.destroy(h)

    run(stack, body)


def test_bad_spec_is_refused_before_or_by_the_service(stack: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        # Refused before sending, with the class the in-process port gives.
        with pytest.raises(airlock.ExecutionRejected, match="image_digest"):
            await env.provision(dataclasses.replace(spec(stack), image_digest="debian:latest"))
        bad_policy = airlock.EgressPolicy(airlock.EgressMode.ALLOWLIST, (airlock.EgressDestination("10.0.0.1", (443,)),))
        with pytest.raises((airlock.ToolValidationError, airlock.ExecutionRejected)):
            await env.provision(dataclasses.replace(spec(stack), egress=bad_policy))

    run(stack, body)


def test_workspace_verbs(stack: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(stack))
        ws = env.workspace(h)
        port: airlock.WorkspaceHandle = ws  # the adapter is the port
        assert port is ws
        assert ws.root == PurePosixPath("/workspace")
        assert ws.resolve("a/b.txt") == PurePosixPath("/workspace/a/b.txt")
        assert ws.resolve(".") == ws.root
        for bad in ("../x", "/etc/passwd", "a/../../x", "a//b", "a/./b", "a\0b", "x" * 256):
            with pytest.raises(airlock.WorkspaceEscape):
                ws.resolve(bad)
            with pytest.raises(airlock.WorkspaceEscape):
                await ws.read(bad)
        data = "h\u00e9llo\n".encode() + bytes(range(256))
        await ws.write("notes.bin", data)
        assert await ws.read("notes.bin") == data
        name = os.fsdecode(b"caf\xe9 \xe2\x80\xa8.txt")
        await ws.write(name, b"")
        assert await ws.read(name) == b""
        listing = await ws.listdir(".")
        by_path = {str(e.path): e for e in listing}
        assert by_path["notes.bin"].size_bytes == len(data)
        assert by_path["notes.bin"].type == airlock.EntryType.FILE
        assert name in by_path
        assert await ws.provenance("notes.bin") == airlock.WorkspaceProvenance.TOOL_WRITTEN
        assert await ws.provenance("never-written") == airlock.WorkspaceProvenance.UNKNOWN
        with pytest.raises(FileNotFoundError):
            await ws.read("missing")
        await env.destroy(h)
        with pytest.raises(airlock.ExecutionRejected):
            await ws.read("notes.bin")

    run(stack, body)


def test_a_cancelled_provision_leaves_no_sandbox(stack: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        before = (await env.health())["live"]
        for delay in (0, 0.001, 0.002, 0.005, 0.01, 0.02) * 3:
            task = asyncio.create_task(env.provision(spec(stack, run="run-cancelled")))
            await asyncio.sleep(delay)
            task.cancel()
            try:
                h = await task
                await env.destroy(h)  # it finished before the cancel came
            except asyncio.CancelledError:
                pass
        await asyncio.gather(*env._cleanups)
        for _ in range(100):
            if (await env.health())["live"] == before:
                break
            await asyncio.sleep(0.05)
        assert (await env.health())["live"] == before

    run(stack, body)


def test_wrong_credential_and_no_service(stack: servers.Stack) -> None:
    async def body() -> None:
        async with ServiceEnvironment(stack.service_address, "not-the-credential") as env:
            with pytest.raises(airlock.ConfigurationError) as e:
                await env.provision(spec(stack))
            assert "not-the-credential" not in str(e.value)
        async with ServiceEnvironment(f"unix:{stack.dir}/nothing.sock", stack.service_token) as env:
            with pytest.raises(airlock.ExecutionUnavailable) as u:
                await env.provision(spec(stack))
            assert airlock.is_retriable(u.value)
            assert stack.service_token not in str(u.value)

    asyncio.run(body())


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_every_connection_is_closed(stack: servers.Stack) -> None:
    async def cycle() -> None:
        async with ServiceEnvironment(stack.service_address, stack.service_token) as env:
            await env.health()
            hs = await asyncio.gather(*(env.provision(spec(stack, run=f"run-{i}")) for i in range(4)))
            await asyncio.gather(*(env.execute(h, cmd("true")) for h in hs))
            ws = env.workspace(hs[0])
            await ws.write("f", b"x")
            await ws.read("f")
            with pytest.raises(airlock.SandboxEscapeSuspected):
                await env.execute(dataclasses.replace(hs[1], lease_epoch=99), cmd("true"))
            for h in hs:
                await env.destroy(h)

    asyncio.run(cycle())  # warm: imports, the loop's own descriptors
    before = _fds()
    asyncio.run(cycle())
    assert _fds() == before


def test_over_tls() -> None:
    with servers.stack("fake", tls=True) as st:
        async def body() -> None:
            async with ServiceEnvironment(st.service_address, st.service_token, tls_ca_file=st.tls_ca_file) as env:
                h = await env.provision(spec(st))
                assert (await env.execute(h, cmd("true", stdin=os.urandom(1 << 20)))).exit_code == 0
                ws = env.workspace(h)
                data = os.urandom(3 << 20)
                await ws.write("big", data)
                assert await ws.read("big") == data
                await env.destroy(h)
            # A certificate nobody vouched for: the peer is verified.
            async with ServiceEnvironment(st.service_address, st.service_token) as env:
                with pytest.raises(airlock.ExecutionUnavailable):
                    await env.health()

        asyncio.run(body())
        before = _fds()
        asyncio.run(body())
        assert _fds() == before


def test_secret_value_is_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    s = airlock.SecretValue("hunter2-s3cr3t")
    logging.getLogger("t").warning("value %s %r %s", s, s, f"{s} {s!r} {s:>30}")
    e = RuntimeError(s)
    for text in (caplog.text, repr(s), str(s), str(e), repr(e), repr([s]), str({"k": s})):
        assert "hunter2" not in text
    assert s.reveal() == b"hunter2-s3cr3t"
    import json
    import pickle

    with pytest.raises(TypeError):
        json.dumps({"k": s})
    with pytest.raises(TypeError):
        pickle.dumps(s)
    assert s == airlock.SecretValue(b"hunter2-s3cr3t") and s != airlock.SecretValue("other")
    env = ServiceEnvironment("unix:/nonexistent", s)
    assert "hunter2" not in repr(env) and "hunter2" not in repr(vars(env))
    asyncio.run(env.aclose())


# ---- native: commands that really run ------------------------------------------


def test_exit_code_and_streams(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        r = await env.execute(h, cmd("sh", "-c", "printf out; printf err >&2; exit 3"))
        assert (r.exit_code, r.stdout, r.stderr, r.killed_by) == (3, b"out", b"err", None)
        await env.destroy(h)

    run(native, body)


def test_stdin_reaches_the_process(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        data = bytes(range(256)) * 100
        r = await env.execute(h, cmd("cat", stdin=data))
        assert r.exit_code == 0 and r.stdout == data
        await env.destroy(h)

    run(native, body)


def test_timeout_sets_both_fields(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        r = await env.execute(h, cmd("sh", "-c", "echo started; sleep 30", timeout=1))
        assert r.timed_out and r.killed_by == airlock.KillReason.TIMEOUT and r.exit_code is None
        assert r.stdout == b"started\n"
        await env.destroy(h)

    run(native, body)


def test_files_changed_and_persistence(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        ws = env.workspace(h)
        await ws.write("keep.txt", b"one")
        await ws.write("gone.txt", b"x")
        r = await env.execute(h, cmd("sh", "-c", "mkdir -p out && printf 1,2 > out/r.csv && printf two >> keep.txt && rm gone.txt"))
        changes = {str(f.path): f for f in r.files_changed}
        assert changes["out/r.csv"].change == airlock.ChangeKind.CREATED and changes["out/r.csv"].size_bytes == 3
        assert changes["keep.txt"].change == airlock.ChangeKind.MODIFIED
        assert changes["gone.txt"].change == airlock.ChangeKind.DELETED and changes["gone.txt"].sha256 is None
        r2 = await env.execute(h, cmd("cat", "keep.txt", "out/r.csv"))
        assert r2.stdout == b"onetwo1,2"
        assert await ws.read("out/r.csv") == b"1,2"
        assert await ws.provenance("out/r.csv") == airlock.WorkspaceProvenance.SANDBOX_WRITTEN
        await env.destroy(h)

    run(native, body)


def test_output_cap_truncates_and_kills(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        r = await env.execute(h, cmd("sh", "-c", "yes | head -c 100000", cap=1000))
        assert r.stdout_truncated and r.killed_by == airlock.KillReason.OUTPUT_LIMIT
        assert len(r.stdout) == 1000 and r.exit_code is None
        await env.destroy(h)

    run(native, body)


def test_cancellation_kills_with_cancelled(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        seen: list[bytes] = []
        started = asyncio.Event()

        def out(stream: str, data: bytes) -> None:
            seen.append(data)
            started.set()

        task = asyncio.create_task(env.execute(h, cmd("sh", "-c", "echo before; sleep 30"), on_output=out))
        await asyncio.wait_for(started.wait(), 10)
        t0 = time.monotonic()
        task.cancel()
        r = await task
        assert time.monotonic() - t0 < 10
        assert r.killed_by == airlock.KillReason.CANCELLED and r.exit_code is None and not r.timed_out
        assert r.stdout == b"before\n"  # the partial output is evidence
        # The sandbox is idle again: the next command runs.
        assert (await env.execute(h, cmd("true"))).exit_code == 0
        await env.destroy(h)

    run(native, body)


def test_cancellation_by_a_timeout_scope(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        t0 = time.monotonic()
        r = await asyncio.wait_for(env.execute(h, cmd("sleep", "30")), 1.0)
        # wait_for's cancellation is delivered as the command's end.
        assert r.killed_by == airlock.KillReason.CANCELLED
        assert time.monotonic() - t0 < 10
        await env.destroy(h)

    run(native, body)


def test_output_is_observed_as_produced(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        got: list[tuple[str, bytes, float]] = []
        t0 = time.monotonic()
        r = await env.execute(
            h, cmd("sh", "-c", "echo a; echo e >&2; sleep 1; echo b"),
            on_output=lambda s, d: got.append((s, d, time.monotonic() - t0)),
        )
        out = b"".join(d for s, d, _ in got if s == "stdout")
        err = b"".join(d for s, d, _ in got if s == "stderr")
        assert (out, err) == (r.stdout, r.stderr) == (b"a\nb\n", b"e\n")
        first = next(t for s, d, t in got if d.startswith(b"a"))
        assert first < 0.9, "the first line arrived only with the result"
        await env.destroy(h)

    run(native, body)


def test_a_slow_observer_still_sees_every_byte(native: servers.Stack) -> None:
    async def body(env: ServiceEnvironment) -> None:
        h = await env.provision(spec(native))
        got: list[bytes] = []
        lines: list[bytes] = []
        event = env._event

        def spy(line: bytes, *a: Any) -> Any:
            lines.append(line[:40])
            return event(line, *a)

        setattr(env, "_event", spy)

        def slow(stream: str, data: bytes) -> None:
            # Blocks the loop: the service's event buffer (1 MiB) fills and
            # it drops events, counted; the rest comes from the result.
            if not got:
                time.sleep(1.0)
            got.append(data)

        r = await env.execute(h, cmd("sh", "-c", "head -c 2000000 /dev/urandom | od -An -v -tx1", cap=16 << 20),
                              on_output=slow)
        assert r.exit_code == 0 and len(r.stdout) > 6000000, r.killed_by
        assert b"".join(got) == r.stdout
        assert any(b'"dropped"' in line for line in lines), "the service dropped nothing: the path is not exercised"
        await env.destroy(h)

    run(native, body)
