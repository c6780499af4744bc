"""airlock: the specification's types and ports, and clients of airlock's
two APIs (the execution service's and the worker's). docs/python.md."""

from .errors import (
    AirlockError,
    ArtifactIntegrityError,
    ConfigurationError,
    CredentialUnavailable,
    DecodeError,
    ExecutionRejected,
    ExecutionUnavailable,
    SandboxEscapeSuspected,
    ToolValidationError,
    Unimplemented,
    WorkspaceEscape,
    is_retriable,
)
from .ports import (
    ArtifactStore,
    ArtifactWriter,
    CredentialResolver,
    ExecutionEnvironment,
    WorkspaceHandle,
)
from .types import (
    ArtifactId,
    ArtifactMetadata,
    ArtifactOrigin,
    ArtifactRef,
    BridgeEndpoint,
    ChangeKind,
    CredentialRef,
    DirEntry,
    EgressDestination,
    EgressMode,
    EgressPolicy,
    EntryType,
    EnvironmentHandle,
    EnvironmentSpec,
    ExecutionCommand,
    ExecutionResult,
    FileChange,
    FileKind,
    KillReason,
    ResourceLimits,
    RunId,
    SecretValue,
    TenantId,
    TrustLevel,
    WorkspaceProvenance,
)
from .service import ServiceEnvironment, ServiceWorkspace, resolve
from .worker import Lease, WorkerClient

__all__ = [
    "AirlockError", "ArtifactIntegrityError", "ConfigurationError", "CredentialUnavailable", "DecodeError",
    "ExecutionRejected", "ExecutionUnavailable", "SandboxEscapeSuspected", "ToolValidationError",
    "Unimplemented", "WorkspaceEscape", "is_retriable",
    "ArtifactStore", "ArtifactWriter", "CredentialResolver", "ExecutionEnvironment", "WorkspaceHandle",
    "ArtifactId", "ArtifactMetadata", "ArtifactOrigin", "ArtifactRef", "BridgeEndpoint", "ChangeKind",
    "CredentialRef", "DirEntry", "EgressDestination", "EgressMode", "EgressPolicy", "EntryType",
    "EnvironmentHandle", "EnvironmentSpec", "ExecutionCommand", "ExecutionResult", "FileChange", "FileKind",
    "KillReason", "ResourceLimits", "RunId", "SecretValue", "TenantId", "TrustLevel", "WorkspaceProvenance",
    "ServiceEnvironment", "ServiceWorkspace", "resolve", "Lease", "WorkerClient",
]
