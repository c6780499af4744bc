"""Real ``airlock serve`` and ``airlock-worker`` processes for the suites,
started and stopped by them (as tests/worker_testlib.c starts them for the
C suites): a settings file, a credential file (0600) and the sockets in a
fresh directory under /tmp, a clean environment (the service refuses to
start with a credential-shaped variable in its own), and SIGTERM at the end
with exit 0 expected. Like the native C suites, the suites take no lock of
their own: meson runs them alone (is_parallel: false), and a person running
them by hand beside other sandbox suites takes
/tmp/airlock-sandbox-tests.lock around the whole run."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .conftest import binary

IMAGE_STORE = os.environ.get("AIRLOCK_TEST_IMAGE_STORE", "/var/lib/airlock/images")
# The fake mechanism runs the empty image; any digest names it.
FAKE_DIGEST = "sha256:" + "0" * 64


def _clean_env() -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "AIRLOCK_IMAGE_STORE": IMAGE_STORE}
    for k in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def native_unavailable() -> str | None:
    """Why native cannot run here, or None."""
    if os.geteuid() != 0:
        return "native needs root"
    if default_image() is None:
        return f"no default image in {IMAGE_STORE} (airlock image build)"
    return None


def require_native() -> None:
    """Skip, with the reason, where native cannot run."""
    import pytest

    why = native_unavailable()
    if why:
        pytest.skip(why)


_image: list[str | None] = []


def default_image() -> str | None:
    if not _image:
        p = subprocess.run([binary("airlock"), "image", "ls"], env=_clean_env(), capture_output=True, text=True)
        digest = None
        for line in p.stdout.splitlines():
            if line.endswith(" default") and line.startswith("sha256:"):
                digest = line.split()[0]
        _image.append(digest)
    return _image[0]


def wait_socket(path: str | tuple[str, int], proc: subprocess.Popen[bytes], log: str, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited {proc.returncode} at start: {open(log).read()}")
        s = socket.socket(socket.AF_UNIX if isinstance(path, str) else socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return
        except OSError:
            time.sleep(0.02)
        finally:
            s.close()
    raise RuntimeError(f"nothing listens on {path} after {seconds} s: {open(log).read()}")


def stop(proc: subprocess.Popen[bytes], log: str) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{proc.args!r} exited {proc.returncode}: {open(log).read()[-4000:]}"


@dataclass
class Stack:
    dir: str
    mechanism: str
    service_address: str
    service_token: str
    image: str
    worker_address: str | None = None
    log: str = ""
    tls_ca_file: str | None = None


@contextmanager
def stack(mechanism: str, *, worker: bool = False, worker_extra: str = "", tls: bool = False,
          tokens: list[tuple[str, str]] | None = None) -> Iterator[Stack]:
    """``airlock serve`` with ``mechanism`` (and ``airlock-worker`` in
    front of it when ``worker``: ``auth_mode: dev``, or with ``tokens``
    ``auth_mode: tokens`` and a ``tokens_file`` of those ``(token, tenant)``
    lines, ``*`` a token of every tenant); with ``tls`` the service listens
    on 127.0.0.1 with a self-signed certificate (openssl) instead of its
    Unix socket."""
    d = tempfile.mkdtemp(prefix="airlock-py-")
    procs: list[subprocess.Popen[bytes]] = []
    log = os.path.join(d, "log")
    try:
        token = secrets.token_hex(24)
        tok = os.path.join(d, "svc.token")
        with open(os.open(tok, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(token + "\n")
        image = FAKE_DIGEST if mechanism == "fake" else (default_image() or "")
        svc_sock = os.path.join(d, "svc.sock")
        w_sock = os.path.join(d, "w.sock")
        image_line = f"  image: {image}\n" if mechanism != "fake" else ""
        listen: str | tuple[str, int] = svc_sock
        listen_line = f"  listen: unix:{svc_sock}\n"
        ca = None
        if tls:
            ca, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", ca,
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            listen = ("127.0.0.1", port)
            listen_line = f"  listen: 127.0.0.1:{port}\n  tls_cert_file: {ca}\n  tls_key_file: {key}\n"
        text = (
            f"sandbox:\n  mechanism: {mechanism}\n{image_line}"
            f"service:\n{listen_line}  credential_file: {tok}\n"
        )
        auth = "  auth_mode: dev\n"
        if tokens is not None:
            tokens_file = os.path.join(d, "tokens")
            # Read as a credential: the worker's user's, 0600.
            with open(os.open(tokens_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                f.write("# the suite's tokens\n\n" + "".join(f"{t} {tenant}\n" for t, tenant in tokens))
            auth = f"  auth_mode: tokens\n  tokens_file: {tokens_file}\n"
        if worker:
            text += (
                f"worker:\n  listen: unix:{w_sock}\n  state_dir: {d}\n{auth}"
                f"  service_address: unix:{svc_sock}\n  service_credential_file: {tok}\n{worker_extra}"
            )
        cfg = os.path.join(d, "airlock.yaml")
        with open(os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(text)
        with open(log, "ab") as logf:
            svc = subprocess.Popen([binary("airlock"), "serve", "--config", cfg], env=_clean_env(),
                                   stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
            procs.append(svc)
            wait_socket(listen, svc, log)
            address = f"unix:{svc_sock}" if isinstance(listen, str) else f"{listen[0]}:{listen[1]}"
            st = Stack(d, mechanism, address, token, image, log=log, tls_ca_file=ca)
            if worker:
                w = subprocess.Popen([binary("airlock-worker"), "--config", cfg], env=_clean_env(),
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
                procs.append(w)
                wait_socket(w_sock, w, log)
                st.worker_address = f"unix:{w_sock}"
        try:
            yield st
        finally:
            for p in reversed(procs):
                stop(p, log)
            procs.clear()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)
