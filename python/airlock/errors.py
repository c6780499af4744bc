"""The failure classes that cross the ports (the specification, "The three
methods and what may fail"), under the names the C side gives them on the wire
(``{"error": CLASS, "message": ...}``, src/core/error.c).

Only :class:`ExecutionUnavailable` is retriable. :func:`is_retriable` is the
one place that says so, and it says no for :class:`SandboxEscapeSuspected`
whatever else is true: an escape is an alert, never a transient failure.
"""

from typing import ClassVar


class AirlockError(Exception):
    """Every failure this package raises on purpose."""

    wire_name: ClassVar[str] = "Error"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ExecutionUnavailable(AirlockError):
    """The service is unreachable, out of capacity or shutting down. Retriable."""

    wire_name = "ExecutionUnavailable"
    retriable = True


class ExecutionRejected(AirlockError):
    """The request is invalid for the service (a caller bug). Not retriable."""

    wire_name = "ExecutionRejected"


class SandboxEscapeSuspected(AirlockError):
    """An invariant the service checks was violated; the sandbox is destroyed.
    Not retriable, and the one failure that must raise an operational alert."""

    wire_name = "SandboxEscapeSuspected"


class WorkspaceEscape(AirlockError):
    """A path failed the containment function."""

    wire_name = "WorkspaceEscape"


class ToolValidationError(AirlockError):
    """A request that does not validate (the message names the field)."""

    wire_name = "ToolValidationError"


class CredentialUnavailable(AirlockError):
    """A credential reference that cannot be resolved here."""

    wire_name = "CredentialUnavailable"


class ArtifactIntegrityError(AirlockError):
    """Bytes whose SHA-256 is not the one they were announced with."""

    wire_name = "ArtifactIntegrityError"


class ConfigurationError(AirlockError):
    """A setting refused, or a credential the other side refused (401)."""

    wire_name = "ConfigurationError"


class DecodeError(AirlockError):
    """JSON that is not the type's wire form (the message names the field)."""

    wire_name = "DecodeError"


class Unimplemented(AirlockError):
    """What the other side does not implement (wire name ``NotImplemented``)."""

    wire_name = "NotImplemented"


class SystemError_(AirlockError):
    """A system error the other side reported without an errno this package maps."""

    wire_name = "SystemError"


WIRE_CLASSES: dict[str, type[AirlockError]] = {
    c.wire_name: c
    for c in (
        AirlockError,
        ExecutionUnavailable,
        ExecutionRejected,
        SandboxEscapeSuspected,
        WorkspaceEscape,
        ToolValidationError,
        CredentialUnavailable,
        ArtifactIntegrityError,
        ConfigurationError,
        DecodeError,
        Unimplemented,
        SystemError_,
    )
}


def is_retriable(exc: BaseException) -> bool:
    """True only for :class:`ExecutionUnavailable`; never for an escape."""
    if isinstance(exc, SandboxEscapeSuspected):
        return False
    return isinstance(exc, AirlockError) and type(exc).retriable
