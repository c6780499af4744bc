"""The specification's ports as Protocols, with its names and signatures."""

from collections.abc import AsyncIterator, Sequence
from pathlib import PurePosixPath
from typing import Protocol

from .types import (
    ArtifactMetadata,
    ArtifactRef,
    CredentialRef,
    EnvironmentHandle,
    EnvironmentSpec,
    ExecutionCommand,
    ExecutionResult,
    FileChange,
    SecretValue,
    TrustLevel,
    WorkspaceProvenance,
)


class ExecutionEnvironment(Protocol):
    async def provision(
        self,
        specification: EnvironmentSpec,
    ) -> EnvironmentHandle:
        ...

    async def execute(
        self,
        environment: EnvironmentHandle,
        command: ExecutionCommand,
    ) -> ExecutionResult:
        ...

    async def destroy(self, environment: EnvironmentHandle) -> None:
        ...


class WorkspaceHandle(Protocol):
    @property
    def root(self) -> PurePosixPath:
        ...

    def resolve(self, path: str | PurePosixPath) -> PurePosixPath:
        ...

    async def read(self, path: str) -> bytes:
        ...

    async def write(self, path: str, data: bytes) -> None:
        ...

    async def listdir(self, path: str) -> Sequence[FileChange]:
        ...

    async def provenance(self, path: str) -> WorkspaceProvenance:
        ...


class ArtifactWriter(Protocol):
    async def create(
        self,
        stream: AsyncIterator[bytes],
        filename: str,
        media_type: str,
        trust: TrustLevel,
    ) -> ArtifactRef:
        ...


class ArtifactStore(Protocol):
    async def put(
        self,
        stream: AsyncIterator[bytes],
        metadata: ArtifactMetadata,
    ) -> ArtifactRef:
        ...

    async def open(self, ref: ArtifactRef) -> AsyncIterator[bytes]:
        ...


class CredentialResolver(Protocol):
    async def resolve(
        self,
        reference: CredentialRef,
    ) -> SecretValue:
        ...
