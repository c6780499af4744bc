"""The specification's types, with its names, field names, field order,
types, frozenness and ``StrEnum`` values (spec/sandbox-isolation.md).

Where the C side carries more than the specification declares, the extra
field comes after the specification's fields with a default, so code written
against the specification constructs and reads these unchanged:

- ``FileChange.kind`` (``FILE`` by default): what kind of entry changed
  (docs/spec-mapping.md, "FileChange lists every non-directory entry").
- ``ExecutionResult.files_changed_truncated`` (``False`` by default): the
  listing was cut at its cap (the specification's "files_changed_truncated
  flag").

The types the specification names without declaring (``TenantId``,
``RunId``, ``ArtifactId``, ``CredentialRef``, ``TrustLevel``,
``EgressPolicy``, ``BridgeEndpoint``) are declared here as the C side
defines them (include/airlock/types.h).
"""

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import PurePosixPath
from typing import NewType, NoReturn

TenantId = NewType("TenantId", str)
RunId = NewType("RunId", str)
ArtifactId = NewType("ArtifactId", str)
CredentialRef = NewType("CredentialRef", str)


class TrustLevel(StrEnum):
    INTERNAL_TOOL = "INTERNAL_TOOL"
    USER_SUPPLIED = "USER_SUPPLIED"
    EXTERNAL_UNTRUSTED = "EXTERNAL_UNTRUSTED"


class KillReason(StrEnum):
    TIMEOUT = "TIMEOUT"
    MEMORY = "MEMORY"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    PIDS = "PIDS"
    DISK = "DISK"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"
    SERVICE_SHUTDOWN = "SERVICE_SHUTDOWN"


class ChangeKind(StrEnum):
    CREATED = "CREATED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


class FileKind(StrEnum):
    """The kind of a changed entry (C: airlock_file_kind)."""

    FILE = "FILE"
    SYMLINK = "SYMLINK"
    FIFO = "FIFO"
    SOCKET = "SOCKET"
    CHAR_DEVICE = "CHAR_DEVICE"
    BLOCK_DEVICE = "BLOCK_DEVICE"


class WorkspaceProvenance(StrEnum):
    UNKNOWN = "unknown"
    TOOL_WRITTEN = "tool_written"
    SANDBOX_WRITTEN = "sandbox_written"


class ArtifactOrigin(StrEnum):
    SANDBOX_EXPORT = "SANDBOX_EXPORT"
    TOOL_OUTPUT = "TOOL_OUTPUT"
    MODEL_OUTPUT = "MODEL_OUTPUT"
    UPLOAD = "UPLOAD"
    TRAJECTORY_EXPORT = "TRAJECTORY_EXPORT"
    KNOWLEDGE_SOURCE = "KNOWLEDGE_SOURCE"


class EgressMode(StrEnum):
    DENY = "deny"
    ALLOWLIST = "allowlist"


class EntryType(StrEnum):
    """A listing entry's type (C: airlock_entry_type)."""

    FILE = "FILE"
    DIRECTORY = "DIRECTORY"
    SYMLINK = "SYMLINK"
    OTHER = "OTHER"


@dataclass(frozen=True)
class ResourceLimits:
    cpu_millicores: int
    memory_bytes: int
    pids_max: int
    workspace_bytes: int
    inodes_max: int
    wall_clock_seconds: int


@dataclass(frozen=True)
class EgressDestination:
    host: str
    ports: Sequence[int]


@dataclass(frozen=True)
class EgressPolicy:
    mode: EgressMode
    destinations: Sequence[EgressDestination]


@dataclass(frozen=True)
class BridgeEndpoint:
    socket_path: str
    # The one-time token authorizes one orchestration turn: kept out of repr
    # so a logged spec does not carry it.
    token: str = field(repr=False)


@dataclass(frozen=True)
class EnvironmentSpec:
    tenant_id: TenantId
    run_id: RunId
    lease_epoch: int
    image_digest: str
    limits: ResourceLimits
    egress: EgressPolicy
    environment: Mapping[str, str]
    bridge: BridgeEndpoint | None


@dataclass(frozen=True)
class EnvironmentHandle:
    environment_id: str
    tenant_id: TenantId
    run_id: RunId
    lease_epoch: int
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class ExecutionCommand:
    argv: Sequence[str]
    working_directory: PurePosixPath
    timeout_seconds: int
    stdin: bytes | None
    maximum_output_bytes: int


@dataclass(frozen=True)
class FileChange:
    # path is relative to /workspace. A name that is not UTF-8 text is
    # decoded with surrogateescape, so the exact bytes come back with
    # os.fsencode(str(path)).
    path: PurePosixPath
    change: ChangeKind
    size_bytes: int
    sha256: str | None
    kind: FileKind = FileKind.FILE


@dataclass(frozen=True)
class ExecutionResult:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    killed_by: KillReason | None
    files_changed: Sequence[FileChange]
    duration_ms: int
    files_changed_truncated: bool = False


@dataclass(frozen=True)
class DirEntry(FileChange):
    """One entry of ``WorkspaceHandle.listdir``: a ``FileChange`` (change
    ``CREATED``, relative to an empty workspace; ``sha256`` None, a listing
    hashes nothing) with the entry's ``type``, which is authoritative (a
    directory's ``kind`` is ``FILE`` for want of a better value)."""

    type: EntryType = EntryType.FILE


@dataclass(frozen=True)
class ArtifactMetadata:
    tenant_id: TenantId
    run_id: RunId | None  # null only before an upload is claimed (ADR-0120)
    origin: ArtifactOrigin
    filename: str
    media_type: str
    size_bytes: int
    sha256: str
    trust: TrustLevel
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class ArtifactRef:
    artifact_id: ArtifactId
    sha256: str
    size_bytes: int
    media_type: str


_REDACTED = "SecretValue(<redacted>)"


class SecretValue:
    """An opaque secret: ``str``, ``repr`` and ``format`` give a redaction
    marker; it cannot be pickled, copied into JSON, or compared except in
    constant time against another SecretValue. Not a security boundary:
    ``reveal()`` gives the value."""

    __slots__ = ("_value",)
    _value: bytes

    def __init__(self, value: str | bytes) -> None:
        object.__setattr__(self, "_value", value.encode() if isinstance(value, str) else bytes(value))

    def reveal(self) -> bytes:
        return self._value

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("SecretValue is immutable")

    def __repr__(self) -> str:
        return _REDACTED

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return _REDACTED

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretValue):
            return NotImplemented
        return hmac.compare_digest(self._value, other._value)

    __hash__ = None  # type: ignore[assignment]

    # Immutable, so a copy is the same object: copy.copy, copy.deepcopy and
    # dataclasses.asdict of a dataclass holding one keep the redacted
    # object (without these they fell through to __reduce__ and failed
    # with a message about pickling).
    def __copy__(self) -> "SecretValue":
        return self

    def __deepcopy__(self, memo: object) -> "SecretValue":
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("a SecretValue cannot be pickled")

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("a SecretValue cannot be pickled")

    def __getstate__(self) -> NoReturn:
        raise TypeError("a SecretValue cannot be serialized")
