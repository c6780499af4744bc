#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The far side of the egress tests' small internet (tests/egress_world.h).

Runs in a network namespace of its own whose only link is the veth peer al1
(moved here by whoever started us). It configures al1 with the public hosts'
and DNS servers' addresses, makes a test CA and one certificate per host with
the openssl CLI, starts the TCP, HTTP and HTTPS servers, dnsmasq and the
hand-written rebinding DNS server, checks that every one of them answers, and
only then reports ready. It runs until its lifeline closes (--life-fd), its
parent goes away, or SIGTERM; dnsmasq, its child, goes with it.

Only 198.51.100.0/24 is ever assigned, and only here and on al0.

Usage: testhost.py --dir DIR [--ready-fd N | --ready-file PATH] [--life-fd N]
                   [--parent-pid PID] [--wait-link SECONDS]
"""

import argparse
import ctypes
import http.server
import os
import select
import shutil
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

HOST_A = "198.51.100.2"
HOST_B = "198.51.100.3"
DNS = "198.51.100.53"
REBIND_DNS = "198.51.100.54"
ADDRESSES = (HOST_A, HOST_B, DNS, REBIND_DNS)
LINK = "al1"

ECHO_PORT = 9000
SINK_PORT = 9001
HTTP_PORT = 80
HTTPS_PORT = 443
ALT_HTTP_PORT = 8080

# dnsmasq's records (the header's table). Names not here are NXDOMAIN.
DNS_RECORDS = (
    ("a.example.com", HOST_A),
    ("b.example.com", HOST_B),
    ("private.example.com", "10.0.0.5"),
    ("mixed.example.com", HOST_A),
    ("mixed.example.com", "10.0.0.5"),
    ("metadata.example.com", "169.254.169.254"),
    ("loop.example.com", "127.0.0.1"),
    ("v6.example.com", "::ffff:169.254.169.254"),
)

REBIND_NAME = "rebind.example.com"
REBIND_FIRST = HOST_A
REBIND_LATER = "10.0.0.5"
# The name the readiness check asks the rebinding server (it is logged like
# any other query; tests count by name, so it never disturbs a count).
READY_PROBE_NAME = "ready.invalid"

IO_TIMEOUT = 30  # seconds a server connection may sit idle
PR_SET_PDEATHSIG = 1


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


class Stop(Exception):
    """SIGTERM or SIGINT is pending. The signals stay blocked for the whole
    run and are polled where we wait, so a stop can never interrupt the
    cleanup that has to happen (dnsmasq ended, the directory removed)."""


def log(msg):
    sys.stderr.write("testhost: %s\n" % msg)
    sys.stderr.flush()


def check_stop():
    if signal.sigpending() & STOP_SIGNALS:
        raise Stop()


def set_pdeathsig(sig):
    """Ask the kernel to send sig when our parent exits: a test process that
    dies without calling egress_world_down must not leave us running."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def dnsmasq_preexec():
    # Runs in the forked child before exec: dnsmasq dies with us even if we
    # are SIGKILLed (it would otherwise keep our namespace alive), and takes
    # SIGTERM, which we keep blocked.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    set_pdeathsig(signal.SIGKILL)


def find_program(name, candidates):
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if not found:
        raise RuntimeError("%s not found" % name)
    return found


def run(argv):
    """Run a setup command; its chatter is shown only when it fails."""
    r = subprocess.run(argv, timeout=30, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                   r.stdout.decode(errors="replace")))


# ---- the link ----------------------------------------------------------------

def wait_link(seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.if_nametoindex(LINK)  # asks this namespace, unlike /sys
            return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not appear within %ss" % (LINK, seconds))
        check_stop()
        time.sleep(0.02)


def configure_link():
    ip = find_program("ip", ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"))
    run([ip, "link", "set", "lo", "up"])
    for addr in ADDRESSES:
        run([ip, "addr", "add", addr + "/24", "dev", LINK])
    run([ip, "link", "set", LINK, "up"])


# ---- certificates ----------------------------------------------------------

def make_certs(d):
    """A CA and a certificate per host, EC P-256, valid for two days."""
    openssl = find_program("openssl", ("/usr/bin/openssl",))
    ca_key = os.path.join(d, "ca.key")
    ca_pem = os.path.join(d, "ca.pem")
    run([openssl, "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:P-256", "-nodes", "-keyout", ca_key, "-out", ca_pem,
         "-days", "2", "-subj", "/CN=airlock egress test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    certs = {}
    for label in ("a", "b"):
        name = label + ".example.com"
        key = os.path.join(d, label + ".key")
        csr = os.path.join(d, label + ".csr")
        pem = os.path.join(d, label + ".pem")
        ext = os.path.join(d, label + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectAltName=DNS:%s\n" % name)
        run([openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + name])
        run([openssl, "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
             "-CAcreateserial", "-out", pem, "-days", "2", "-extfile", ext])
        certs[label] = (pem, key)
    return certs


# ---- TCP servers -------------------------------------------------------------

class TCPServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class EchoHandler(socketserver.BaseRequestHandler):
    """Echoes every byte; after the client's FIN writes "bye\\n" and closes."""

    def handle(self):
        s = self.request
        s.settimeout(IO_TIMEOUT)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                s.sendall(data)
            s.sendall(b"bye\n")
        except OSError:
            pass


class SinkHandler(socketserver.BaseRequestHandler):
    """Reads to EOF, then writes the byte count and a newline."""

    def handle(self):
        s = self.request
        s.settimeout(IO_TIMEOUT)
        n = 0
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                n += len(data)
            s.sendall(b"%d\n" % n)
        except OSError:
            pass


class HTTPHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is real
    timeout = IO_TIMEOUT
    server_version = "egress-world"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body=b"", location=None):
        self.send_response(code)
        if location is not None:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if self.path == "/":
            self.reply(200, ("hello from %s\n" % self.server.label).encode())
        elif url.path == "/redirect":
            to = urllib.parse.parse_qs(url.query).get("to")
            if not to:
                self.reply(400)
            else:
                # No body: a redirect's body is not what any test reads.
                self.reply(302, location=to[0])
        else:
            self.reply(404)


class HTTPServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, addr, label, tls=None):
        self.label = label
        self.tls = tls
        super().__init__(addr, HTTPHandler)

    def finish_request(self, request, client_address):
        # The TLS handshake happens here, in the connection's own thread, so
        # a client that connects and says nothing never blocks accept().
        if self.tls is not None:
            request.settimeout(IO_TIMEOUT)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)


# ---- the rebinding DNS server ---------------------------------------------

def parse_question(msg):
    """(id, flags, name, qtype, question bytes) or None for anything but one
    plain query."""
    if len(msg) < 12:
        return None
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
    if flags & 0x8000 or (flags >> 11) & 0xF != 0 or qd != 1:
        return None
    labels = []
    i = 12
    while True:
        if i >= len(msg):
            return None
        n = msg[i]
        i += 1
        if n == 0:
            break
        if n > 63 or i + n > len(msg):
            return None  # no compression in a question we accept
        labels.append(msg[i:i + n].decode("ascii", "replace").lower())
        i += n
    if i + 4 > len(msg):
        return None
    qtype, qclass = struct.unpack("!HH", msg[i:i + 4])
    return qid, flags, ".".join(labels), qtype, qclass, msg[12:i + 4]


class RebindDNS(threading.Thread):
    """rebind.example.com: the first A query answers 198.51.100.2, every
    later one 10.0.0.5, both with TTL 0; no AAAA; every other name NXDOMAIN.
    Each query is logged as "name qtype\\n" and flushed before the answer is
    sent, so a test that has its answer can count it."""

    def __init__(self, addr, log_path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, 53))
        self.log = open(log_path, "a", buffering=1)
        self.a_answers = 0

    def answer(self, q):
        qid, flags, name, qtype, qclass, question = q
        rcode = 0
        answers = b""
        count = 0
        if name != REBIND_NAME:
            rcode = 3
        elif qtype == 1 and qclass == 1:
            addr = REBIND_FIRST if self.a_answers == 0 else REBIND_LATER
            self.a_answers += 1
            answers = (b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) +
                       socket.inet_aton(addr))
            count = 1
        # QR, AA, the query's RD; RA off (no recursion here).
        rflags = 0x8400 | (flags & 0x0100) | rcode
        return struct.pack("!HHHHHH", qid, rflags, 1, count, 0, 0) + question + answers

    def run(self):
        while True:
            try:
                msg, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            q = parse_question(msg)
            if q is None:
                continue
            self.log.write("%s %d\n" % (q[2], q[3]))
            self.log.flush()
            try:
                self.sock.sendto(self.answer(q), peer)
            except OSError:
                pass


# ---- readiness ---------------------------------------------------------------

def dns_query(server, name, qtype=1):
    """Ask server once; (rcode, answer count) or None on no answer."""
    qid = int.from_bytes(os.urandom(2), "big")
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", qtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        try:
            s.sendto(q, (server, 53))
            r = s.recv(4096)
        except OSError:
            return None
    if len(r) < 12:
        return None
    rid, flags, _, an, _, _ = struct.unpack("!HHHHHH", r[:12])
    if rid != qid:
        return None
    return flags & 0xF, an


def wait_ready(deadline, dnsmasq):
    pending_tcp = [(a, p) for a in (HOST_A, HOST_B)
                   for p in (ECHO_PORT, SINK_PORT, HTTP_PORT, HTTPS_PORT, ALT_HTTP_PORT)]
    dns_ok = rebind_ok = False
    while True:
        for a, p in list(pending_tcp):
            try:
                socket.create_connection((a, p), timeout=0.5).close()
                pending_tcp.remove((a, p))
            except OSError:
                pass
        if not dns_ok:
            dns_ok = dns_query(DNS, "a.example.com") == (0, 1)
        if not rebind_ok:
            r = dns_query(REBIND_DNS, READY_PROBE_NAME)
            rebind_ok = r is not None and r[0] == 3
        if not pending_tcp and dns_ok and rebind_ok:
            return
        if dnsmasq.poll() is not None:
            raise RuntimeError("dnsmasq exited with status %s" % dnsmasq.returncode)
        if time.monotonic() > deadline:
            raise RuntimeError("not ready: tcp %s dns %s rebind %s" %
                               (pending_tcp, dns_ok, rebind_ok))
        check_stop()
        time.sleep(0.05)


# ---- main --------------------------------------------------------------------

def start_dnsmasq(d):
    dnsmasq = find_program("dnsmasq", ("/usr/sbin/dnsmasq",))
    argv = [dnsmasq,
            "--keep-in-foreground",
            "--conf-file=/dev/null",     # no /etc/dnsmasq.conf
            "--no-resolv", "--no-hosts", "--no-poll",
            "--user=root", "--group=root",
            "--pid-file",                # no argument: no pid file
            "--listen-address=" + DNS, "--bind-interfaces", "--port=53",
            # Authoritative for our names, NXDOMAIN for every other: nothing
            # is ever forwarded anywhere.
            "--address=/#/",
            "--log-queries", "--log-facility=" + os.path.join(d, "dnsmasq.log")]
    for name, addr in DNS_RECORDS:
        argv.append("--host-record=%s,%s" % (name, addr))
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            close_fds=True, preexec_fn=dnsmasq_preexec)


def signal_ready(args):
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"ready\n")
        os.close(args.ready_fd)
    if args.ready_file is not None:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, args.ready_file)


def wait_stop(args, dnsmasq):
    while True:
        check_stop()
        fds = [args.life_fd] if args.life_fd is not None else []
        r, _, _ = select.select(fds, [], [], 0.1)
        if r and not os.read(args.life_fd, 64):
            return  # the lifeline closed: whoever started us is gone
        if dnsmasq.poll() is not None:
            raise RuntimeError("dnsmasq exited with status %s" % dnsmasq.returncode)
        if args.parent_pid is not None and os.getppid() != args.parent_pid:
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ready-fd", type=int)
    ap.add_argument("--ready-file")
    ap.add_argument("--life-fd", type=int)
    ap.add_argument("--parent-pid", type=int)
    ap.add_argument("--wait-link", type=float, default=10.0)
    args = ap.parse_args()

    # Blocked before any thread starts, so no thread takes them either.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    set_pdeathsig(signal.SIGTERM)
    if args.parent_pid is not None and os.getppid() != args.parent_pid:
        return 1  # the parent went before the death signal was armed

    dnsmasq = None
    try:
        deadline = time.monotonic() + 18  # within the caller's 20 s
        wait_link(args.wait_link)
        configure_link()
        certs = make_certs(args.dir)
        # dnsmasq starts from this (the main) thread: its death signal is
        # tied to the thread that forked it.
        dnsmasq = start_dnsmasq(args.dir)

        servers = []
        for addr, label in ((HOST_A, "a"), (HOST_B, "b")):
            servers.append(TCPServer((addr, ECHO_PORT), EchoHandler))
            servers.append(TCPServer((addr, SINK_PORT), SinkHandler))
            servers.append(HTTPServer((addr, HTTP_PORT), label))
            servers.append(HTTPServer((addr, ALT_HTTP_PORT), label))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*certs[label])
            servers.append(HTTPServer((addr, HTTPS_PORT), label, tls=ctx))
        for s in servers:
            threading.Thread(target=s.serve_forever, daemon=True).start()
        RebindDNS(REBIND_DNS, os.path.join(args.dir, "rebind-queries.log")).start()

        wait_ready(deadline, dnsmasq)
        signal_ready(args)
        wait_stop(args, dnsmasq)
        return 0
    except Stop:
        return 0
    except Exception as e:  # reported, and the caller sees no "ready"
        log(str(e))
        return 1
    finally:
        if dnsmasq is not None and dnsmasq.poll() is None:
            dnsmasq.terminate()
            try:
                dnsmasq.wait(timeout=3)
            except subprocess.TimeoutExpired:
                dnsmasq.kill()
                dnsmasq.wait(timeout=3)
        # The caller removes the directory too; doing it here as well
        # leaves nothing behind when the caller died without cleaning up.
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
