"""The specification's types: their declarations, and their JSON forms byte
for byte the C side's, both ways (the C side is tests/python_wire.c)."""

import dataclasses
import os
import subprocess
import typing
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

import pytest

import airlock
from airlock import wire
from airlock.errors import DecodeError

from .conftest import binary

UTC = timezone.utc
T0 = datetime(2026, 11, 29, 23, 34, 4, 123000, tzinfo=UTC)
T1 = datetime(2026, 11, 30, 0, 4, 4, 0, tzinfo=UTC)
SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
DIGEST = "sha256:" + SHA
UUID7 = "0192d3f5-7b1c-7cc2-9a1e-3f5e8d2c4b6a"


def c_round_trip(type_name: str, data: bytes) -> tuple[int, bytes]:
    p = subprocess.run([binary("python_wire"), type_name], input=data, capture_output=True, timeout=30)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, p.stdout


LIMITS = airlock.ResourceLimits(2000, 2 << 30, 512, 4 << 30, 100000, 300)
ALLOW = airlock.EgressPolicy(
    airlock.EgressMode.ALLOWLIST,
    (airlock.EgressDestination("pypi.org", (443,)), airlock.EgressDestination("*.pythonhosted.org", (443, 8443))),
)
DENY = airlock.EgressPolicy(airlock.EgressMode.DENY, ())

VALUES: list[Any] = [
    LIMITS,
    airlock.ResourceLimits(1, 8 << 20, 4, 1, 1, 1),
    DENY,
    ALLOW,
    airlock.BridgeEndpoint("/run/airlock/bridge.sock", "tok-\u00e9\u2028"),
    airlock.EnvironmentSpec(
        airlock.TenantId("tenant-a"), airlock.RunId("run_1"), 0, DIGEST, LIMITS, DENY, {}, None
    ),
    airlock.EnvironmentSpec(
        airlock.TenantId("T" * 128),
        airlock.RunId("r"),
        2**62,
        DIGEST,
        LIMITS,
        ALLOW,
        {"LANG": "C.UTF-8", "NOTE": "caf\u00e9 \U0001f600 \"q\" \\ \t\n\x01\x7f", "EMPTY": ""},
        airlock.BridgeEndpoint("/run/b.sock", "one-time"),
    ),
    airlock.EnvironmentHandle("env_0123", airlock.TenantId("tenant-a"), airlock.RunId("run-1"), 3, T0, T1),
    airlock.EnvironmentHandle("e" * 63, airlock.TenantId("t"), airlock.RunId("r"), 0, T1, T1),
    airlock.ExecutionCommand(("sh", "-c", "echo h\u00e9llo >&2"), PurePosixPath("."), 30, None, 1 << 20),
    airlock.ExecutionCommand(("cat",), PurePosixPath("sub/dir"), 1, b"", 1),
    airlock.ExecutionCommand(("cat", "\u2603", ""), PurePosixPath("a"), 5, bytes(range(256)), 7),
    airlock.FileChange(PurePosixPath("output.csv"), airlock.ChangeKind.CREATED, 1204, SHA),
    airlock.FileChange(PurePosixPath("gone"), airlock.ChangeKind.DELETED, 0, None, airlock.FileKind.SYMLINK),
    airlock.FileChange(PurePosixPath(os.fsdecode(b"caf\xe9/\xff\x01n\xc3\xa9\xe2\x80\xa8")), airlock.ChangeKind.MODIFIED, 5, SHA),
    airlock.FileChange(PurePosixPath("\ufffd41"), airlock.ChangeKind.CREATED, 0, SHA, airlock.FileKind.FIFO),
    airlock.ExecutionResult(0, b"", b"", False, False, False, None, (), 0),
    airlock.ExecutionResult(
        None,
        b"\x00\xffpartial",
        "\u00e9rr".encode(),
        True,
        False,
        True,
        airlock.KillReason.TIMEOUT,
        (
            airlock.FileChange(PurePosixPath("a/b"), airlock.ChangeKind.CREATED, 3, SHA),
            airlock.FileChange(PurePosixPath("c"), airlock.ChangeKind.DELETED, 0, None),
        ),
        1840,
        True,
    ),
    airlock.ExecutionResult(-1, b"x", b"", False, True, False, None, (), 2**40),
    airlock.ExecutionResult(None, b"", b"", False, False, False, airlock.KillReason.SERVICE_SHUTDOWN, (), 1),
    airlock.ArtifactMetadata(
        airlock.TenantId("tenant-a"),
        airlock.RunId("run-1"),
        airlock.ArtifactOrigin.SANDBOX_EXPORT,
        "report.csv",
        "text/csv",
        1204,
        SHA,
        airlock.TrustLevel.EXTERNAL_UNTRUSTED,
        T0,
        T1,
    ),
    airlock.ArtifactMetadata(
        airlock.TenantId("t"),
        None,
        airlock.ArtifactOrigin.UPLOAD,
        "../../etc/passwd \u00e9\n\u202e",
        "application/vnd.a+b.c",
        0,
        SHA,
        airlock.TrustLevel.USER_SUPPLIED,
        T1,
        None,
    ),
    airlock.ArtifactRef(airlock.ArtifactId(UUID7), SHA, 0, "text/plain"),
    airlock.ArtifactRef(airlock.ArtifactId(UUID7), SHA, 2**53, "application/octet-stream"),
    airlock.ExecutionRejected("environment env_1 is not live: \u00e9 \"x\""),
    airlock.SandboxEscapeSuspected(""),
]


def type_name(v: Any) -> str:
    return "Error" if isinstance(v, airlock.AirlockError) else type(v).__name__


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type_name(v))
def test_python_encoding_is_what_c_writes_back(value: Any) -> None:
    mine = wire.to_json(value)
    rc, theirs = c_round_trip(type_name(value), mine)
    assert rc == 0, theirs
    assert theirs == mine
    if isinstance(value, airlock.AirlockError):
        back = wire.from_json(airlock.AirlockError, theirs)
        assert type(back) is type(value) and back.message == value.message
    else:
        assert wire.from_json(type(value), theirs) == value


# JSON the C side writes (and reads), not written by this package: the C
# side's canonical form of each is decoded here and must encode back to the
# same bytes.
C_TEXTS: list[tuple[str, str]] = [
    ("ResourceLimits", '{"wall_clock_seconds":9,"cpu_millicores":1,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":5,"inodes_max":6}'),
    ("EgressPolicy", '{"destinations":[{"ports":[1,65535],"host":"a.example.com"}],"mode":"allowlist"}'),
    ("EnvironmentHandle", '{"expires_at":"2026-01-01T00:00:00Z","created_at":"2025-12-31T23:59:59.999Z","environment_id":"env_x","tenant_id":"a","run_id":"b","lease_epoch":1}'),
    ("ExecutionCommand", '{"argv":["\\u00e9","\\ud83d\\ude00","\\u0001"],"working_directory":"x/y","timeout_seconds":1,"stdin":"QQ==","maximum_output_bytes":1}'),
    ("FileChange", '{"path":"a\ufffd01b\u00e9","change":"CREATED","kind":"SOCKET","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"\ufffdff\ufffdfe","change":"DELETED","kind":"FILE","size_bytes":0,"sha256":null}'),
    ("ExecutionResult", '{"exit_code":null,"stdout":"","stderr":"/w==","stdout_truncated":true,"stderr_truncated":true,"timed_out":false,"killed_by":"OUTPUT_LIMIT","files_changed":[],"files_changed_truncated":false,"duration_ms":0}'),
    ("ArtifactMetadata", '{"tenant_id":"t","run_id":null,"origin":"KNOWLEDGE_SOURCE","filename":"\\u0000","media_type":"a/b","size_bytes":1,"sha256":"' + SHA + '","trust":"INTERNAL_TOOL","created_at":"1970-01-01T00:00:00.000Z","expires_at":null}'),
    ("ArtifactRef", '{"artifact_id":"' + UUID7 + '","sha256":"' + SHA + '","size_bytes":1,"media_type":"image/svg+xml"}'),
    ("Error", '{"error":"ArtifactIntegrityError","message":"\\u2028\\/"}'),
]


@pytest.mark.parametrize("type_name,text", C_TEXTS, ids=[t for t, _ in C_TEXTS])
def test_c_encoding_is_what_python_writes_back(type_name: str, text: str) -> None:
    rc, canonical = c_round_trip(type_name, text.encode())
    if type_name == "ArtifactMetadata":
        # A NUL in a string is refused on both sides.
        assert rc == 1
        with pytest.raises(DecodeError):
            wire.from_json(airlock.ArtifactMetadata, text)
        return
    assert rc == 0, canonical
    cls: type = airlock.AirlockError if type_name == "Error" else getattr(airlock, type_name)
    assert wire.to_json(wire.from_json(cls, canonical)) == canonical
    # The input itself decodes to the same value on this side.
    assert wire.to_json(wire.from_json(cls, text)) == canonical


BAD: list[tuple[str, str]] = [
    ("ResourceLimits", '{"cpu_millicores":1,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1}'),
    ("ResourceLimits", '{"cpu_millicores":1,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1,"x":1}'),
    ("ResourceLimits", '{"cpu_millicores":1.0,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1}'),
    ("ResourceLimits", '{"cpu_millicores":true,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1}'),
    ("ResourceLimits", '{"cpu_millicores":0,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1}'),
    ("ResourceLimits", '{"cpu_millicores":1,"memory_bytes":100,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1}'),
    ("ResourceLimits", '{"cpu_millicores":1,"cpu_millicores":1,"memory_bytes":8388608,"pids_max":4,"workspace_bytes":1,"inodes_max":1,"wall_clock_seconds":1}'),
    ("EgressPolicy", '{"mode":"allow","destinations":[]}'),
    ("EgressPolicy", '{"mode":"allowlist","destinations":[{"host":"a.b","ports":[0]}]}'),
    ("EnvironmentHandle", '{"environment_id":"env/x","tenant_id":"a","run_id":"b","lease_epoch":1,"created_at":"2025-12-31T23:59:59.999Z","expires_at":"2026-01-01T00:00:00Z"}'),
    ("EnvironmentHandle", '{"environment_id":"e","tenant_id":"a","run_id":"b","lease_epoch":1,"created_at":"2026-02-31T00:00:00Z","expires_at":"2026-03-01T00:00:00Z"}'),
    ("EnvironmentHandle", '{"environment_id":"e","tenant_id":"a","run_id":"b","lease_epoch":1,"created_at":"2026-01-01T00:00:00+00:00","expires_at":"2026-03-01T00:00:00Z"}'),
    ("EnvironmentHandle", '{"environment_id":"e","tenant_id":"a","run_id":"b","lease_epoch":1,"created_at":"2026-03-01T00:00:00Z","expires_at":"2026-01-01T00:00:00Z"}'),
    ("ExecutionCommand", '{"argv":[],"working_directory":".","timeout_seconds":1,"stdin":null,"maximum_output_bytes":1}'),
    ("ExecutionCommand", '{"argv":"ls","working_directory":".","timeout_seconds":1,"stdin":null,"maximum_output_bytes":1}'),
    ("ExecutionCommand", '{"argv":["ls"],"working_directory":"/etc","timeout_seconds":1,"stdin":null,"maximum_output_bytes":1}'),
    ("ExecutionCommand", '{"argv":["ls"],"working_directory":".","timeout_seconds":1,"stdin":"QQ","maximum_output_bytes":1}'),
    ("ExecutionCommand", '{"argv":["l\\u0000s"],"working_directory":".","timeout_seconds":1,"stdin":null,"maximum_output_bytes":1}'),
    ("FileChange", '{"path":"a\\u0001b","change":"CREATED","kind":"SOCKET","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"\ufffd41","change":"CREATED","kind":"FILE","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"\ufffdzz","change":"CREATED","kind":"FILE","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"a","change":"DELETED","kind":"FILE","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"a","change":"CREATED","kind":"DIRECTORY","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("FileChange", '{"path":"/a","change":"CREATED","kind":"FILE","size_bytes":0,"sha256":"' + SHA + '"}'),
    ("ExecutionResult", '{"exit_code":0,"stdout":"","stderr":"","stdout_truncated":false,"stderr_truncated":false,"timed_out":false,"killed_by":"MEMORY","files_changed":[],"files_changed_truncated":false,"duration_ms":0}'),
    ("ExecutionResult", '{"exit_code":null,"stdout":"","stderr":"","stdout_truncated":false,"stderr_truncated":false,"timed_out":false,"killed_by":"TIMEOUT","files_changed":[],"files_changed_truncated":false,"duration_ms":0}'),
    ("ExecutionResult", '{"exit_code":null,"stdout":"","stderr":"","stdout_truncated":false,"stderr_truncated":false,"timed_out":false,"killed_by":"OOM","files_changed":[],"files_changed_truncated":false,"duration_ms":0}'),
    ("ArtifactMetadata", '{"tenant_id":"t","run_id":null,"origin":"UPLOAD","filename":"","media_type":"a/b","size_bytes":1,"sha256":"' + SHA + '","trust":"INTERNAL_TOOL","created_at":"1970-01-01T00:00:00.000Z","expires_at":null}'),
    ("ArtifactMetadata", '{"tenant_id":"t","run_id":null,"origin":"UPLOAD","filename":"f","media_type":"text/plain; charset=utf-8","size_bytes":1,"sha256":"' + SHA + '","trust":"INTERNAL_TOOL","created_at":"1970-01-01T00:00:00.000Z","expires_at":null}'),
    ("ArtifactRef", '{"artifact_id":"0192d3f5-7b1c-4cc2-9a1e-3f5e8d2c4b6a","sha256":"' + SHA + '","size_bytes":1,"media_type":"a/b"}'),
    ("ArtifactRef", '{"artifact_id":"' + UUID7 + '","sha256":"' + SHA.upper() + '","size_bytes":1,"media_type":"a/b"}'),
    ("Error", '{"error":"NoSuchClass","message":""}'),
    ("ExecutionResult", "[]"),
    ("ExecutionResult", "{"),
    ("ExecutionResult", '{"exit_code":NaN}'),
]


@pytest.mark.parametrize("type_name,text", BAD, ids=[f"{t}-{i}" for i, (t, _) in enumerate(BAD)])
def test_both_sides_refuse(type_name: str, text: str) -> None:
    rc, out = c_round_trip(type_name, text.encode())
    assert rc == 1, out
    cls: type = airlock.AirlockError if type_name == "Error" else getattr(airlock, type_name)
    with pytest.raises(DecodeError):
        wire.from_json(cls, text)


def test_python_encoder_refuses_what_c_refuses() -> None:
    with pytest.raises(DecodeError, match="image_digest"):
        wire.to_json(dataclasses.replace(VALUES[5], image_digest="debian:latest"))
    with pytest.raises(DecodeError, match="naive|aware"):
        wire.to_json(airlock.EnvironmentHandle("e", airlock.TenantId("t"), airlock.RunId("r"), 0, datetime(2026, 1, 1), T1))
    with pytest.raises(DecodeError, match="sha256"):
        wire.to_json(airlock.FileChange(PurePosixPath("a"), airlock.ChangeKind.CREATED, 0, None))
    with pytest.raises(DecodeError, match="UTF-8"):
        wire.to_json(airlock.ExecutionCommand(("\udcff",), PurePosixPath("."), 1, None, 1))


# ---- the declarations ---------------------------------------------------------

SPEC_FIELDS: dict[type, list[tuple[str, object]]] = {
    airlock.EnvironmentSpec: [
        ("tenant_id", airlock.TenantId), ("run_id", airlock.RunId), ("lease_epoch", int), ("image_digest", str),
        ("limits", airlock.ResourceLimits), ("egress", airlock.EgressPolicy),
        ("environment", Mapping[str, str]), ("bridge", airlock.BridgeEndpoint | None),
    ],
    airlock.ResourceLimits: [
        ("cpu_millicores", int), ("memory_bytes", int), ("pids_max", int), ("workspace_bytes", int),
        ("inodes_max", int), ("wall_clock_seconds", int),
    ],
    airlock.EnvironmentHandle: [
        ("environment_id", str), ("tenant_id", airlock.TenantId), ("run_id", airlock.RunId),
        ("lease_epoch", int), ("created_at", datetime), ("expires_at", datetime),
    ],
    airlock.ExecutionCommand: [
        ("argv", Sequence[str]), ("working_directory", PurePosixPath), ("timeout_seconds", int),
        ("stdin", bytes | None), ("maximum_output_bytes", int),
    ],
    airlock.ExecutionResult: [
        ("exit_code", int | None), ("stdout", bytes), ("stderr", bytes), ("stdout_truncated", bool),
        ("stderr_truncated", bool), ("timed_out", bool), ("killed_by", airlock.KillReason | None),
        ("files_changed", Sequence[airlock.FileChange]), ("duration_ms", int),
    ],
    airlock.FileChange: [
        ("path", PurePosixPath), ("change", airlock.ChangeKind), ("size_bytes", int), ("sha256", str | None),
    ],
    airlock.ArtifactMetadata: [
        ("tenant_id", airlock.TenantId), ("run_id", airlock.RunId | None), ("origin", airlock.ArtifactOrigin),
        ("filename", str), ("media_type", str), ("size_bytes", int), ("sha256", str),
        ("trust", airlock.TrustLevel), ("created_at", datetime), ("expires_at", datetime | None),
    ],
    airlock.ArtifactRef: [
        ("artifact_id", airlock.ArtifactId), ("sha256", str), ("size_bytes", int), ("media_type", str),
    ],
}


@pytest.mark.parametrize("cls", list(SPEC_FIELDS), ids=lambda c: str(c.__name__))
def test_dataclasses_are_the_specifications(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = dataclasses.fields(cls)
    want = SPEC_FIELDS[cls]
    assert [(f.name, f.type) for f in fields[: len(want)]] == want
    # What the C side adds comes after, with a default, so the
    # specification's positional constructor works unchanged.
    for f in fields[len(want):]:
        assert f.default is not dataclasses.MISSING
    for f in fields[: len(want)]:
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    hints = typing.get_type_hints(cls)
    assert list(hints)[: len(want)] == [n for n, _ in want]


def test_strenum_values() -> None:
    assert issubclass(airlock.KillReason, StrEnum)
    assert [m.value for m in airlock.KillReason] == [
        "TIMEOUT", "MEMORY", "OUTPUT_LIMIT", "PIDS", "DISK", "CANCELLED", "EXPIRED", "SERVICE_SHUTDOWN"]
    assert [m.value for m in airlock.ChangeKind] == ["CREATED", "MODIFIED", "DELETED"]
    assert [(m.name, m.value) for m in airlock.WorkspaceProvenance] == [
        ("UNKNOWN", "unknown"), ("TOOL_WRITTEN", "tool_written"), ("SANDBOX_WRITTEN", "sandbox_written")]
    assert [m.value for m in airlock.ArtifactOrigin] == [
        "SANDBOX_EXPORT", "TOOL_OUTPUT", "MODEL_OUTPUT", "UPLOAD", "TRAJECTORY_EXPORT", "KNOWLEDGE_SOURCE"]
    for e in (airlock.ChangeKind, airlock.WorkspaceProvenance, airlock.ArtifactOrigin, airlock.TrustLevel):
        assert issubclass(e, StrEnum)


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        LIMITS.pids_max = 1  # type: ignore[misc]


def test_protocols_have_the_specifications_methods() -> None:
    import inspect

    def sig(p: type, name: str) -> tuple[bool, list[str]]:
        f = getattr(p, name)
        if isinstance(f, property):
            return False, ["self"]
        return inspect.iscoroutinefunction(f), list(inspect.signature(f).parameters)

    assert sig(airlock.ExecutionEnvironment, "provision") == (True, ["self", "specification"])
    assert sig(airlock.ExecutionEnvironment, "execute") == (True, ["self", "environment", "command"])
    assert sig(airlock.ExecutionEnvironment, "destroy") == (True, ["self", "environment"])
    assert isinstance(inspect.getattr_static(airlock.WorkspaceHandle, "root"), property)
    assert sig(airlock.WorkspaceHandle, "resolve") == (False, ["self", "path"])
    for m, params in (("read", ["self", "path"]), ("write", ["self", "path", "data"]),
                      ("listdir", ["self", "path"]), ("provenance", ["self", "path"])):
        assert sig(airlock.WorkspaceHandle, m) == (True, params)
    assert sig(airlock.ArtifactStore, "put") == (True, ["self", "stream", "metadata"])
    assert sig(airlock.ArtifactStore, "open") == (True, ["self", "ref"])
    assert sig(airlock.ArtifactWriter, "create") == (True, ["self", "stream", "filename", "media_type", "trust"])
    assert sig(airlock.CredentialResolver, "resolve") == (True, ["self", "reference"])
    for name in ("ExecutionUnavailable", "ExecutionRejected", "SandboxEscapeSuspected",
                 "WorkspaceEscape", "ArtifactIntegrityError"):
        assert issubclass(getattr(airlock, name), Exception)
