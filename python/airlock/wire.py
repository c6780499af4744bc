"""The JSON forms of the specification's types, byte for byte the C side's
(src/core/json.c, include/airlock/json.h).

Encoding writes what jansson's ``json_dumps(JSON_COMPACT)`` writes: members
in the C encoder's order, no spaces, non-ASCII as UTF-8, and only ``"``,
``\\``, and the C0 controls escaped (``\\b \\f \\n \\r \\t``, the rest as
``\\u00XX`` with uppercase hex). Decoding is as strict as the C decoder: an
unknown, missing or mistyped member, a duplicate key, a NUL in a string, a
non-integer number where an integer belongs, and each type's invariants
are refused with :class:`~airlock.errors.DecodeError` naming the field.
Encoders check the same invariants, so what this module writes the C side
reads, and the other way round (tests/test_types.py holds both sides to it).

Bytes (``stdin``, ``stdout``, ``stderr``) are base64 with padding;
timestamps RFC 3339 UTC with milliseconds; ``FileChange.path`` the lossless
text form (each byte of a non-UTF-8 sequence or a character that would
misread written as U+FFFD and two lowercase hex digits).
"""

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath
from typing import Any, TypeVar

from .errors import WIRE_CLASSES, AirlockError, DecodeError
from .types import (
    ArtifactMetadata,
    ArtifactOrigin,
    ArtifactRef,
    ArtifactId,
    BridgeEndpoint,
    ChangeKind,
    EgressDestination,
    EgressMode,
    EgressPolicy,
    EnvironmentHandle,
    EnvironmentSpec,
    ExecutionCommand,
    ExecutionResult,
    FileChange,
    FileKind,
    KillReason,
    ResourceLimits,
    RunId,
    TenantId,
    TrustLevel,
)

# include/airlock/caps.h
ID_MAX = 128
ENVIRONMENT_ID_MAX = 63
PATH_MAX = 4096
JSON_INPUT_MAX = 64 * 1024 * 1024
SPEC_JSON_MAX = 256 * 1024
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
# 9999-12-31T23:59:59.999Z, the range the C side writes and reads.
_TIME_MS_MAX = 253402300799999
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z")
_RESTRICTED = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA = re.compile(_RESTRICTED + "/" + _RESTRICTED + r"\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?Z\Z", re.ASCII)

T = TypeVar("T")


def _fail(type_: str, key: str, why: str) -> DecodeError:
    return DecodeError(f"{type_}.{key}: {why}")


# ---- the compact dump jansson writes ----------------------------------------

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _esc(m: "re.Match[str]") -> str:
    c = m.group(0)
    return _SHORT.get(c) or "\\u%04X" % ord(c)


def _dump_str(s: str) -> str:
    # Lone surrogates are not text: jansson would refuse the bytes.
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DecodeError(f"not valid UTF-8 at index {e.start}") from None
    return '"' + _ESCAPE.sub(_esc, s) + '"'


def dump(v: object) -> str:
    """``v`` (dict, list, str, int, bool, None) as jansson's compact text."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, str):
        return _dump_str(v)
    if isinstance(v, dict):
        return "{" + ",".join(_dump_str(k) + ":" + dump(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(dump(x) for x in v) + "]"
    raise TypeError(f"cannot encode {type(v).__name__}")


def _no_dups(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise DecodeError(f"duplicate object key {k!r}")
        d[k] = v
    return d


def _no_constant(name: str) -> Any:
    raise DecodeError(f"{name} is not JSON")


# The most values (keys included) one text may decode into. Every answer
# either API sends holds far fewer (a listing's 100,000 entries are 700,000;
# files_changed's 10,000 are 110,000); past it a hostile 64 MiB text would
# decode into tens of millions of Python objects (a body of "[]," is 21
# million lists, 1.5 GiB and 13 s of parsing, measured here).
VALUES_MAX = 1_000_000
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _values_bound(raw: bytes) -> int:
    """At least the number of values and keys ``raw`` decodes into: one
    more than its separators and openings."""
    return raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") + 1


def load(
    data: bytes | str, limit: int = JSON_INPUT_MAX, allow_nul: bool = False, max_values: int = VALUES_MAX
) -> Any:
    """Parse JSON as strictly as the C decoder (no duplicate keys, no NaN,
    no NUL in a string unless ``allow_nul``, at most ``limit`` bytes), and
    into at most ``max_values`` values and keys (counted before parsing,
    with the strings taken out)."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > limit:
        raise DecodeError(f"input is {len(raw)} bytes, over the {limit} byte limit")
    # The bound counts separators inside strings too (an output full of
    # commas): only past it are the strings taken out and the rest counted.
    if _values_bound(raw) > max_values and _values_bound(_STRING.sub(b"", raw)) > max_values:
        raise DecodeError(f"input holds more than {max_values} values")
    try:
        text = raw.decode("utf-8")
        v = json.loads(text, object_pairs_hook=_no_dups, parse_constant=_no_constant)
    except DecodeError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DecodeError(f"not JSON: {e}") from None
    _check_nul(v, allow_nul)
    return v


def _check_nul(v: Any, allow_nul: bool = False) -> None:
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if "\0" in x and not allow_nul:
                raise DecodeError("a string holds a NUL byte")
        elif isinstance(x, dict):
            for k, y in x.items():
                if "\0" in k:
                    raise DecodeError("a key holds a NUL byte")
                stack.append(y)
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, float):
            raise DecodeError("a number is not an integer")


# ---- field helpers ------------------------------------------------------------


def _obj(o: Any, type_: str, fields: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(o, dict):
        raise DecodeError(f"{type_}: must be a JSON object")
    for k in o:
        if k not in fields:
            raise _fail(type_, k, "unknown field")
    for k in fields:
        if k not in o:
            raise _fail(type_, k, "missing")
    return o


def _int(o: dict[str, Any], type_: str, key: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    v = o[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise _fail(type_, key, "must be an integer")
    if v < lo:
        raise _fail(type_, key, f"must be >= {lo} (got {v})")
    if v > hi:
        raise _fail(type_, key, f"must be <= {hi} (got {v})")
    return v


def _bool(o: dict[str, Any], type_: str, key: str) -> bool:
    v = o[key]
    if not isinstance(v, bool):
        raise _fail(type_, key, "must be a boolean")
    return v


def _str(o: dict[str, Any], type_: str, key: str, nullable: bool = False) -> Any:
    v = o[key]
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        raise _fail(type_, key, "must be a string or null" if nullable else "must be a string")
    return v


def _b64(o: dict[str, Any], type_: str, key: str, nullable: bool = False) -> bytes | None:
    s = _str(o, type_, key, nullable)
    if s is None:
        return None
    if len(s) % 4 or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", s):
        raise _fail(type_, key, "must be base64 (RFC 4648, standard alphabet, padded)")
    try:
        return base64.b64decode(s, validate=True)
    except binascii.Error:
        raise _fail(type_, key, "must be base64 (RFC 4648, standard alphabet, padded)") from None


def _enc_b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def parse_time(s: str, type_: str = "time", key: str = "value") -> datetime:
    m = _TIME.match(s)
    bad = _fail(type_, key, "must be an RFC 3339 UTC timestamp such as 2026-11-29T23:34:04.123Z")
    if not m:
        raise bad
    y, mo, d, h, mi, se = (int(m.group(i)) for i in range(1, 7))
    ms = int(m.group(7) or 0)
    if y < 1970 or h > 23 or mi > 59 or se > 59:
        raise bad
    try:
        return datetime(y, mo, d, h, mi, se, ms * 1000, tzinfo=timezone.utc)
    except ValueError:
        raise bad from None


def _time(o: dict[str, Any], type_: str, key: str, nullable: bool = False) -> datetime | None:
    s = _str(o, type_, key, nullable)
    return None if s is None else parse_time(s, type_, key)


def time_ms(dt: datetime, type_: str = "time", key: str = "value") -> int:
    """Milliseconds since the epoch of an aware datetime (sub-millisecond
    precision is dropped toward the past, as the C side keeps milliseconds)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise _fail(type_, key, "must be an aware datetime (UTC)")
    delta = dt - _EPOCH
    ms = (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if ms < 0 or ms > _TIME_MS_MAX:
        raise _fail(type_, key, f"timestamp {ms} ms is outside 1970..9999")
    return ms


def format_time(dt: datetime, type_: str = "time", key: str = "value") -> str:
    ms = time_ms(dt, type_, key)
    t = _EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ms % 1000)


def _id(v: object, type_: str, key: str, nullable: bool = False) -> None:
    if v is None and nullable:
        return
    if not isinstance(v, str) or not _ID.match(v):
        raise _fail(type_, key, f"must be {'null or ' if nullable else ''}1..{ID_MAX} of [A-Za-z0-9_-]")


def _sha(v: object, type_: str, key: str) -> None:
    if not isinstance(v, str) or not _SHA256.match(v):
        raise _fail(type_, key, "must be 64 lowercase hex digits")


def _media(v: object, type_: str, key: str) -> None:
    if not isinstance(v, str) or not _MEDIA.match(v):
        raise _fail(type_, key, "must be type/subtype (RFC 6838 names, no parameters), like text/plain")


def _posint(v: object, type_: str, key: str, lo: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise _fail(type_, key, "must be an integer")
    if v < lo or v > INT64_MAX:
        raise _fail(type_, key, f"must be >= {lo} (got {v})" if v < lo else "out of range")
    return v


def _enum(e: type[T], s: str, type_: str, key: str, what: str) -> T:
    try:
        return e(s)  # type: ignore[call-arg]
    except ValueError:
        raise _fail(type_, key, f"unknown {what} \"{s[:32]}\"") from None


# ---- a path's text form ---------------------------------------------------------


def _escaped(c: int) -> bool:
    return (
        c < 0x20
        or 0x7F <= c <= 0x9F
        or c in (0x2028, 0x2029, 0x200E, 0x200F, 0xFFFD)
        or 0x202A <= c <= 0x202E
        or 0x2066 <= c <= 0x2069
    )


def _utf8_len(b: bytes, i: int) -> int:
    """The length of the well-formed UTF-8 sequence at b[i], or 0."""
    c = b[i]
    if c < 0x80:
        return 1
    for n, lo, hi in ((2, 0xC2, 0xDF), (3, 0xE0, 0xEF), (4, 0xF0, 0xF4)):
        if lo <= c <= hi:
            break
    else:
        return 0
    if i + n > len(b):
        return 0
    try:
        b[i : i + n].decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return n


def path_to_text(b: bytes) -> str:
    out: list[str] = []
    i = 0
    while i < len(b):
        k = _utf8_len(b, i)
        if k:
            ch = b[i : i + k].decode("utf-8")
            if not _escaped(ord(ch)):
                out.append(ch)
                i += k
                continue
        for _ in range(k or 1):
            out.append("\ufffd%02x" % b[i])
            i += 1
    return "".join(out)


def path_from_text(text: str, type_: str, key: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\ufffd":
            h = text[i + 1 : i + 3]
            if len(h) != 2 or not re.fullmatch("[0-9a-f]{2}", h):
                raise _fail(type_, key, "U+FFFD must be followed by two lowercase hex digits (the escaped byte)")
            out.append(int(h, 16))
            i += 3
        else:
            out += c.encode("utf-8")
            i += 1
    if 0 in out:
        raise _fail(type_, key, "an escaped NUL byte")
    if path_to_text(bytes(out)) != text:
        raise _fail(
            type_,
            key,
            "not in canonical text form (a byte escaped that need not be, or one not escaped that must be)",
        )
    return bytes(out)


# ---- the types ----------------------------------------------------------------

_LIMITS = ("cpu_millicores", "memory_bytes", "pids_max", "workspace_bytes", "inodes_max", "wall_clock_seconds")
MEMORY_BYTES_MIN = 8 * 1024 * 1024
PIDS_MIN = 4  # AIRLOCK_LIMIT_PIDS_MIN


def _limits_check(v: ResourceLimits, what: str) -> None:
    for k in _LIMITS:
        x = getattr(v, k)
        if not isinstance(x, int) or isinstance(x, bool) or x <= 0:
            raise DecodeError(f"{what}.{k}: must be > 0 (got {x})")
    if v.memory_bytes < MEMORY_BYTES_MIN:
        raise DecodeError(
            f"{what}.memory_bytes: {v.memory_bytes} is below the {MEMORY_BYTES_MIN} bytes (8 MiB) a sandbox needs to start"
        )
    if v.pids_max < PIDS_MIN:
        raise DecodeError(
            f"{what}.pids_max: {v.pids_max} is below the {PIDS_MIN} processes a sandbox needs to start a command"
        )


def _limits_to(v: ResourceLimits) -> dict[str, Any]:
    _limits_check(v, "ResourceLimits")
    return {k: getattr(v, k) for k in _LIMITS}


def _limits_from(o: Any) -> ResourceLimits:
    o = _obj(o, "ResourceLimits", _LIMITS)
    v = ResourceLimits(*(_int(o, "ResourceLimits", k, 1) for k in _LIMITS))
    _limits_check(v, "ResourceLimits")
    return v


def _egress_to(v: EgressPolicy) -> dict[str, Any]:
    mode = EgressMode(v.mode)
    dests = []
    for i, d in enumerate(v.destinations):
        if not isinstance(d.host, str) or not d.host:
            raise DecodeError(f"EgressPolicy.destinations[{i}]: EgressDestination.host: missing")
        for p in d.ports:
            if not isinstance(p, int) or isinstance(p, bool) or not 1 <= p <= 65535:
                raise DecodeError(f"EgressPolicy.destinations[{i}]: ports must be integers in 1..65535")
        dests.append({"host": d.host, "ports": list(d.ports)})
    if mode is EgressMode.DENY and dests:
        raise DecodeError("EgressPolicy.destinations: mode deny lists no destinations")
    return {"mode": mode.value, "destinations": dests}


def _egress_from(o: Any) -> EgressPolicy:
    o = _obj(o, "EgressPolicy", ("mode", "destinations"))
    mode = _str(o, "EgressPolicy", "mode")
    if mode not in ("deny", "allowlist"):
        raise _fail("EgressPolicy", "mode", 'must be "deny" or "allowlist"')
    if not isinstance(o["destinations"], list):
        raise _fail("EgressPolicy", "destinations", "must be an array")
    dests = []
    for i, d in enumerate(o["destinations"]):
        try:
            d = _obj(d, "EgressDestination", ("host", "ports"))
            if not isinstance(d["ports"], list):
                raise _fail("EgressDestination", "ports", "must be an array")
            host = _str(d, "EgressDestination", "host")
            ports = []
            for j, p in enumerate(d["ports"]):
                if not isinstance(p, int) or isinstance(p, bool) or not 1 <= p <= 65535:
                    raise _fail("EgressDestination", f"ports[{j}]", "must be an integer in 1..65535")
                ports.append(p)
        except DecodeError as e:
            raise DecodeError(f"EgressPolicy.destinations[{i}]: {e.message}") from None
        dests.append(EgressDestination(host, tuple(ports)))
    v = EgressPolicy(EgressMode(mode), tuple(dests))
    _egress_to(v)
    return v


def _bridge_check(v: BridgeEndpoint) -> None:
    if not isinstance(v.socket_path, str) or not v.socket_path.startswith("/"):
        raise _fail("BridgeEndpoint", "socket_path", "must be an absolute path inside the sandbox")
    if not isinstance(v.token, str) or not v.token:
        raise _fail("BridgeEndpoint", "token", "must not be empty")


def _bridge_to(v: BridgeEndpoint) -> dict[str, Any]:
    _bridge_check(v)
    return {"socket_path": v.socket_path, "token": v.token}


def _bridge_from(o: Any) -> BridgeEndpoint:
    o = _obj(o, "BridgeEndpoint", ("socket_path", "token"))
    v = BridgeEndpoint(_str(o, "BridgeEndpoint", "socket_path"), _str(o, "BridgeEndpoint", "token"))
    _bridge_check(v)
    return v


_SPEC = ("tenant_id", "run_id", "lease_epoch", "image_digest", "limits", "egress", "environment", "bridge")


def _prefixed(prefix: str, f: Callable[[Any], T], x: Any) -> T:
    try:
        return f(x)
    except DecodeError as e:
        raise DecodeError(f"{prefix}: {e.message}") from None


def _spec_check(v: EnvironmentSpec) -> None:
    t = "EnvironmentSpec"
    _id(v.tenant_id, t, "tenant_id")
    _id(v.run_id, t, "run_id")
    if not isinstance(v.lease_epoch, int) or isinstance(v.lease_epoch, bool) or v.lease_epoch < 0:
        raise _fail(t, "lease_epoch", f"must be >= 0 (got {v.lease_epoch})")
    if (
        not isinstance(v.image_digest, str)
        or not v.image_digest.startswith("sha256:")
        or not _SHA256.match(v.image_digest[7:])
    ):
        raise _fail(t, "image_digest", 'must be "sha256:" and 64 lowercase hex digits, never a tag')
    for name, value in v.environment.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise _fail(t, "environment", f"name {name!r} must be [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(value, str):
            raise DecodeError(f"{t}.environment.{name}: must be a string")


def _spec_to(v: EnvironmentSpec) -> dict[str, Any]:
    _spec_check(v)
    return {
        "tenant_id": v.tenant_id,
        "run_id": v.run_id,
        "lease_epoch": v.lease_epoch,
        "image_digest": v.image_digest,
        "limits": _prefixed("EnvironmentSpec.limits", _limits_to, v.limits),
        "egress": _prefixed("EnvironmentSpec.egress", _egress_to, v.egress),
        "environment": dict(v.environment),
        "bridge": None if v.bridge is None else _prefixed("EnvironmentSpec.bridge", _bridge_to, v.bridge),
    }


def _spec_from(o: Any) -> EnvironmentSpec:
    t = "EnvironmentSpec"
    o = _obj(o, t, _SPEC)
    env = o["environment"]
    if not isinstance(env, dict):
        raise _fail(t, "environment", "must be an object of name to string value")
    for k, x in env.items():
        if not isinstance(x, str):
            raise DecodeError(f"{t}.environment.{k[:64]}: must be a string")
    v = EnvironmentSpec(
        TenantId(_str(o, t, "tenant_id")),
        RunId(_str(o, t, "run_id")),
        _int(o, t, "lease_epoch", 0),
        _str(o, t, "image_digest"),
        _prefixed("EnvironmentSpec.limits", _limits_from, o["limits"]),
        _prefixed("EnvironmentSpec.egress", _egress_from, o["egress"]),
        dict(env),
        None if o["bridge"] is None else _prefixed("EnvironmentSpec.bridge", _bridge_from, o["bridge"]),
    )
    _spec_check(v)
    return v


_HANDLE = ("environment_id", "tenant_id", "run_id", "lease_epoch", "created_at", "expires_at")


def _handle_check(v: EnvironmentHandle) -> None:
    t = "EnvironmentHandle"
    if not isinstance(v.environment_id, str) or not _ID.match(v.environment_id) or len(v.environment_id) > 63:
        raise _fail(t, "environment_id", "must be 1..63 of [A-Za-z0-9_-]")
    _id(v.tenant_id, t, "tenant_id")
    _id(v.run_id, t, "run_id")
    if not isinstance(v.lease_epoch, int) or isinstance(v.lease_epoch, bool) or v.lease_epoch < 0:
        raise _fail(t, "lease_epoch", "must be >= 0")
    if time_ms(v.expires_at, t, "expires_at") < time_ms(v.created_at, t, "created_at"):
        raise _fail(t, "expires_at", "must not be before created_at")


def _handle_to(v: EnvironmentHandle) -> dict[str, Any]:
    _handle_check(v)
    t = "EnvironmentHandle"
    return {
        "environment_id": v.environment_id,
        "tenant_id": v.tenant_id,
        "run_id": v.run_id,
        "lease_epoch": v.lease_epoch,
        "created_at": format_time(v.created_at, t, "created_at"),
        "expires_at": format_time(v.expires_at, t, "expires_at"),
    }


def _handle_from(o: Any) -> EnvironmentHandle:
    t = "EnvironmentHandle"
    o = _obj(o, t, _HANDLE)
    eid = _str(o, t, "environment_id")
    if len(eid.encode()) >= ENVIRONMENT_ID_MAX + 1:
        raise _fail(t, "environment_id", f"too long ({len(eid.encode())} bytes, at most {ENVIRONMENT_ID_MAX})")
    created = _time(o, t, "created_at")
    expires = _time(o, t, "expires_at")
    assert created is not None and expires is not None
    v = EnvironmentHandle(
        eid,
        TenantId(_str(o, t, "tenant_id")),
        RunId(_str(o, t, "run_id")),
        _int(o, t, "lease_epoch", 0),
        created,
        expires,
    )
    _handle_check(v)
    return v


_CMD = ("argv", "working_directory", "timeout_seconds", "stdin", "maximum_output_bytes")


def _cmd_check(v: ExecutionCommand) -> None:
    t = "ExecutionCommand"
    if isinstance(v.argv, (str, bytes)) or len(v.argv) == 0:
        raise _fail(t, "argv", "must be a non-empty vector")
    for i, a in enumerate(v.argv):
        if not isinstance(a, str):
            raise _fail(t, f"argv[{i}]", "must be a string")
    wd = str(v.working_directory)
    if not wd or wd.startswith("/"):
        raise _fail(t, "working_directory", "must be a non-empty path relative to /workspace")
    _posint(v.timeout_seconds, t, "timeout_seconds", 1)
    _posint(v.maximum_output_bytes, t, "maximum_output_bytes", 1)
    if v.stdin is not None and not isinstance(v.stdin, (bytes, bytearray, memoryview)):
        raise _fail(t, "stdin", "must be bytes or None")


def _cmd_to(v: ExecutionCommand) -> dict[str, Any]:
    _cmd_check(v)
    return {
        "argv": list(v.argv),
        "working_directory": str(v.working_directory),
        "timeout_seconds": v.timeout_seconds,
        "stdin": None if v.stdin is None else _enc_b64(bytes(v.stdin)),
        "maximum_output_bytes": v.maximum_output_bytes,
    }


def _cmd_from(o: Any) -> ExecutionCommand:
    t = "ExecutionCommand"
    o = _obj(o, t, _CMD)
    argv = o["argv"]
    if not isinstance(argv, list):
        raise _fail(t, "argv", "must be an array")
    for i, a in enumerate(argv):
        if not isinstance(a, str):
            raise _fail(t, f"argv[{i}]", "must be a string")
    wd = _str(o, t, "working_directory")
    # The C side keeps the text as it came; a PurePosixPath would fold "a/./b"
    # into "a/b" and so not write back the same bytes: refuse such forms.
    if not wd or wd.startswith("/") or str(PurePosixPath(wd)) != wd:
        raise _fail(t, "working_directory", "must be a non-empty normalized path relative to /workspace")
    v = ExecutionCommand(
        tuple(argv),
        PurePosixPath(wd),
        _int(o, t, "timeout_seconds", 1),
        _b64(o, t, "stdin", nullable=True),
        _int(o, t, "maximum_output_bytes", 1),
    )
    _cmd_check(v)
    return v


_FC = ("path", "change", "kind", "size_bytes", "sha256")


def _fc_path_bytes(p: PurePosixPath) -> bytes:
    return os.fsencode(str(p))


def _fc_check(v: FileChange) -> bytes:
    t = "FileChange"
    b = _fc_path_bytes(v.path)
    if not b or b.startswith(b"/") or b == b".":
        raise _fail(t, "path", "must be a non-empty path relative to /workspace")
    if len(b) > PATH_MAX:
        raise _fail(t, "path", f"longer than {PATH_MAX} bytes")
    ChangeKind(v.change)
    FileKind(v.kind)
    if isinstance(v.size_bytes, bool) or not isinstance(v.size_bytes, int) or v.size_bytes < 0:
        raise _fail(t, "size_bytes", "must be >= 0")
    deleted = v.change == ChangeKind.DELETED
    if (v.sha256 is not None) == deleted:
        raise _fail(t, "sha256", "must be null for DELETED" if deleted else "required unless DELETED")
    if v.sha256 is not None:
        _sha(v.sha256, t, "sha256")
    return b


def _fc_to(v: FileChange) -> dict[str, Any]:
    b = _fc_check(v)
    return {
        "path": path_to_text(b),
        "change": ChangeKind(v.change).value,
        "kind": FileKind(v.kind).value,
        "size_bytes": v.size_bytes,
        "sha256": v.sha256,
    }


def _fc_from(o: Any) -> FileChange:
    t = "FileChange"
    o = _obj(o, t, _FC)
    text = _str(o, t, "path")
    b = path_from_text(text, t, "path")
    path = os.fsdecode(b)
    if not b or b.startswith(b"/") or str(PurePosixPath(path)) != path:
        raise _fail(t, "path", "must be a non-empty normalized path relative to /workspace")
    change = _str(o, t, "change")
    if change not in ChangeKind.__members__:
        raise _fail(t, "change", "must be CREATED, MODIFIED or DELETED")
    kind = _str(o, t, "kind")
    if kind not in FileKind.__members__:
        raise _fail(t, "kind", "must be FILE, SYMLINK, FIFO, SOCKET, CHAR_DEVICE or BLOCK_DEVICE")
    sha = _str(o, t, "sha256", nullable=True)
    if sha is not None and len(sha) != 64:
        raise _fail(t, "sha256", "must be 64 lowercase hex digits")
    v = FileChange(PurePosixPath(path), ChangeKind(change), _int(o, t, "size_bytes", 0), sha, FileKind(kind))
    _fc_check(v)
    return v


_RESULT = (
    "exit_code",
    "stdout",
    "stderr",
    "stdout_truncated",
    "stderr_truncated",
    "timed_out",
    "killed_by",
    "files_changed",
    "files_changed_truncated",
    "duration_ms",
)


def _result_check(v: ExecutionResult) -> None:
    t = "ExecutionResult"
    killed = None if v.killed_by is None else KillReason(v.killed_by)
    if (v.exit_code is not None) != (killed is None):
        raise _fail(
            t, "exit_code", "must be null when killed_by is set" if v.exit_code is not None else "required when killed_by is null"
        )
    if v.exit_code is not None and (isinstance(v.exit_code, bool) or not -(2**31) <= v.exit_code < 2**31):
        raise _fail(t, "exit_code", "out of range")
    if v.timed_out != (killed == KillReason.TIMEOUT):
        raise _fail(t, "timed_out", "must be true exactly when killed_by is TIMEOUT")
    if isinstance(v.duration_ms, bool) or not isinstance(v.duration_ms, int) or v.duration_ms < 0:
        raise _fail(t, "duration_ms", "must be >= 0")


def _result_to(v: ExecutionResult) -> dict[str, Any]:
    _result_check(v)
    files = []
    for i, f in enumerate(v.files_changed):
        files.append(_prefixed(f"ExecutionResult.files_changed[{i}]", _fc_to, f))
    return {
        "exit_code": v.exit_code,
        "stdout": _enc_b64(bytes(v.stdout)),
        "stderr": _enc_b64(bytes(v.stderr)),
        "stdout_truncated": bool(v.stdout_truncated),
        "stderr_truncated": bool(v.stderr_truncated),
        "timed_out": bool(v.timed_out),
        "killed_by": None if v.killed_by is None else KillReason(v.killed_by).value,
        "files_changed": files,
        "files_changed_truncated": bool(v.files_changed_truncated),
        "duration_ms": v.duration_ms,
    }


def _result_from(o: Any) -> ExecutionResult:
    t = "ExecutionResult"
    o = _obj(o, t, _RESULT)
    ec = o["exit_code"]
    if ec is not None:
        if not isinstance(ec, int) or isinstance(ec, bool):
            raise _fail(t, "exit_code", "must be an integer or null")
        if not -(2**31) <= ec < 2**31:
            raise _fail(t, "exit_code", "out of range")
    out = _b64(o, t, "stdout")
    err = _b64(o, t, "stderr")
    assert out is not None and err is not None
    killed = _str(o, t, "killed_by", nullable=True)
    if not isinstance(o["files_changed"], list):
        raise _fail(t, "files_changed", "must be an array")
    flags = [_bool(o, t, k) for k in ("stdout_truncated", "stderr_truncated", "timed_out", "files_changed_truncated")]
    duration = _int(o, t, "duration_ms", 0)
    if killed is not None and killed not in KillReason.__members__:
        raise _fail(t, "killed_by", f'unknown kill reason "{killed[:32]}"')
    files = [_prefixed(f"{t}.files_changed[{i}]", _fc_from, f) for i, f in enumerate(o["files_changed"])]
    v = ExecutionResult(
        ec,
        out,
        err,
        flags[0],
        flags[1],
        flags[2],
        None if killed is None else KillReason(killed),
        tuple(files),
        duration,
        flags[3],
    )
    _result_check(v)
    return v


_META = (
    "tenant_id",
    "run_id",
    "origin",
    "filename",
    "media_type",
    "size_bytes",
    "sha256",
    "trust",
    "created_at",
    "expires_at",
)


def _meta_check(v: ArtifactMetadata) -> None:
    t = "ArtifactMetadata"
    _id(v.tenant_id, t, "tenant_id")
    _id(v.run_id, t, "run_id", nullable=True)
    ArtifactOrigin(v.origin)
    if not isinstance(v.filename, str) or not v.filename:
        raise _fail(t, "filename", "must not be empty")
    _media(v.media_type, t, "media_type")
    if isinstance(v.size_bytes, bool) or not isinstance(v.size_bytes, int) or v.size_bytes < 0:
        raise _fail(t, "size_bytes", "must be >= 0")
    _sha(v.sha256, t, "sha256")
    TrustLevel(v.trust)


def _meta_to(v: ArtifactMetadata) -> dict[str, Any]:
    _meta_check(v)
    t = "ArtifactMetadata"
    return {
        "tenant_id": v.tenant_id,
        "run_id": v.run_id,
        "origin": ArtifactOrigin(v.origin).value,
        "filename": v.filename,
        "media_type": v.media_type,
        "size_bytes": v.size_bytes,
        "sha256": v.sha256,
        "trust": TrustLevel(v.trust).value,
        "created_at": format_time(v.created_at, t, "created_at"),
        "expires_at": None if v.expires_at is None else format_time(v.expires_at, t, "expires_at"),
    }


def _meta_from(o: Any) -> ArtifactMetadata:
    t = "ArtifactMetadata"
    o = _obj(o, t, _META)
    tenant = _str(o, t, "tenant_id")
    run = _str(o, t, "run_id", nullable=True)
    origin = _str(o, t, "origin")
    filename = _str(o, t, "filename")
    media = _str(o, t, "media_type")
    size = _int(o, t, "size_bytes", 0)
    sha = _str(o, t, "sha256")
    if len(sha.encode()) > 64:
        raise _fail(t, "sha256", f"too long ({len(sha.encode())} bytes, at most 64)")
    trust = _str(o, t, "trust")
    created = _time(o, t, "created_at")
    expires = _time(o, t, "expires_at", nullable=True)
    assert created is not None
    v = ArtifactMetadata(
        TenantId(tenant),
        None if run is None else RunId(run),
        _enum(ArtifactOrigin, origin, t, "origin", "origin"),
        filename,
        media,
        size,
        sha,
        _enum(TrustLevel, trust, t, "trust", "trust level"),
        created,
        expires,
    )
    _meta_check(v)
    return v


_REF = ("artifact_id", "sha256", "size_bytes", "media_type")


def _ref_check(v: ArtifactRef) -> None:
    t = "ArtifactRef"
    if not isinstance(v.artifact_id, str) or not _UUID7.match(v.artifact_id):
        raise _fail(t, "artifact_id", "must be a lowercase canonical UUIDv7")
    _sha(v.sha256, t, "sha256")
    if isinstance(v.size_bytes, bool) or not isinstance(v.size_bytes, int) or v.size_bytes < 0:
        raise _fail(t, "size_bytes", "must be >= 0")
    _media(v.media_type, t, "media_type")


def _ref_to(v: ArtifactRef) -> dict[str, Any]:
    _ref_check(v)
    return {"artifact_id": v.artifact_id, "sha256": v.sha256, "size_bytes": v.size_bytes, "media_type": v.media_type}


def _ref_from(o: Any) -> ArtifactRef:
    t = "ArtifactRef"
    o = _obj(o, t, _REF)
    v = ArtifactRef(
        ArtifactId(_str(o, t, "artifact_id")),
        _str(o, t, "sha256"),
        _int(o, t, "size_bytes", 0),
        _str(o, t, "media_type"),
    )
    _ref_check(v)
    return v


# ---- errors ---------------------------------------------------------------------


def error_to_value(e: AirlockError) -> dict[str, Any]:
    return {"error": type(e).wire_name, "message": e.message}


def error_from_value(o: Any) -> AirlockError:
    o = _obj(o, "Error", ("error", "message"))
    name = _str(o, "Error", "error")
    msg = _str(o, "Error", "message")
    cls = WIRE_CLASSES.get(name)
    if cls is None:
        raise _fail("Error", "error", f'unknown error class "{name[:64]}"')
    return cls(msg)


# ---- entry points -----------------------------------------------------------------

_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    ResourceLimits: _limits_to,
    EgressPolicy: _egress_to,
    BridgeEndpoint: _bridge_to,
    EnvironmentSpec: _spec_to,
    EnvironmentHandle: _handle_to,
    ExecutionCommand: _cmd_to,
    FileChange: _fc_to,
    ExecutionResult: _result_to,
    ArtifactMetadata: _meta_to,
    ArtifactRef: _ref_to,
}
_DECODERS: dict[type, Callable[[Any], Any]] = {
    ResourceLimits: _limits_from,
    EgressPolicy: _egress_from,
    BridgeEndpoint: _bridge_from,
    EnvironmentSpec: _spec_from,
    EnvironmentHandle: _handle_from,
    ExecutionCommand: _cmd_from,
    FileChange: _fc_from,
    ExecutionResult: _result_from,
    ArtifactMetadata: _meta_from,
    ArtifactRef: _ref_from,
}
TYPES: tuple[type, ...] = tuple(_ENCODERS)


def to_value(v: object) -> dict[str, Any]:
    """The JSON tree (ordered) of one of the types or an AirlockError."""
    if isinstance(v, AirlockError):
        return error_to_value(v)
    enc = _ENCODERS.get(type(v))
    if enc is None:
        raise TypeError(f"no wire form for {type(v).__name__}")
    try:
        return enc(v)
    except ValueError as e:  # an enum member that is not one
        if isinstance(e, DecodeError):  # pragma: no cover - DecodeError is not a ValueError
            raise
        raise DecodeError(f"{type(v).__name__}: {e}") from None


def to_json(v: object) -> bytes:
    """The C side's exact bytes for ``v``."""
    text = dump(to_value(v))
    if isinstance(v, EnvironmentSpec) and len(text.encode()) > SPEC_JSON_MAX:
        raise DecodeError(f"EnvironmentSpec: encoding is {len(text.encode())} bytes, over the {SPEC_JSON_MAX} byte limit")
    return text.encode("utf-8")


def from_value(cls: type[T], o: Any) -> T:
    if cls is AirlockError:
        return error_from_value(o)  # type: ignore[return-value]
    dec = _DECODERS.get(cls)
    if dec is None:
        raise TypeError(f"no wire form for {cls.__name__}")
    return dec(o)  # type: ignore[no-any-return]


def from_json(cls: type[T], data: bytes | str) -> T:
    """Decode ``data`` as ``cls`` as strictly as the C decoder."""
    return from_value(cls, load(data))


def iter_types() -> Iterable[type]:
    return TYPES


__all__ = [
    "dump",
    "load",
    "to_json",
    "to_value",
    "from_json",
    "from_value",
    "path_to_text",
    "path_from_text",
    "format_time",
    "parse_time",
    "TYPES",
]

_ = Mapping  # re-exported types above are used in annotations only
