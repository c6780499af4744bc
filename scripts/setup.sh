#!/usr/bin/env bash
# Install what is missing (Debian 12 packages), then configure and build.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every package the project needs, and why (docs/design-notes.md has the longer story).
packages=(
	gcc pkg-config meson ninja-build   # the build
	libcriterion-dev                   # tests: per-test process isolation, a runner CI reads
	libjansson-dev                     # JSON encoding and strict decoding of the port's types
	libyaml-dev                        # settings file (and the egress policy grammar)
	libssl-dev                         # SHA-256 and base64 via libcrypto EVP
	libseccomp-dev                     # the native sandbox's seccomp filter, built and exported as BPF
	libc-ares-dev                      # egress: the proxy's resolver (A and AAAA once, configurable servers)
	libevent-dev                       # egress: the proxy's event loop (listeners, tunnels, timers)
	libcurl4-openssl-dev               # egress: the worker's outbound guard; the remote adapter (the service's client)
	libmicrohttpd-dev libgnutls28-dev  # the execution service's internal API (HTTP/1.1, Unix socket or TCP+TLS via GnuTLS)
	libpsl-dev publicsuffix            # egress: refuse wildcard destinations over a public suffix (*.co.uk, *.github.io)
	libsqlite3-dev libpq-dev           # the worker's database: SQLite embedded, PostgreSQL shared (libpq)
	postgresql                         # tests: test_worker_db starts a real server (initdb, pg_ctl) of its own
	iproute2 dnsmasq-base curl openssl # egress tests: test hosts in netns, their DNS, TLS certs, a client
	tinyproxy                          # bench/bench_proxy compares the proxy with tinyproxy
	python3                            # test helpers parse JSON output
	python3-yaml                       # tests: worker_openapi reads docs/worker-openapi.yaml
	python3-httpx                      # the Python package's one dependency (async HTTP on Unix sockets and TLS)
	python3-pytest                     # the Python package's suites (python_types, python_contract, python_venv)
	mypy                               # python_mypy: mypy --strict over the package and its tests
	python3-venv python3-setuptools python3-wheel  # python_venv: pip install ./python offline into a fresh venv
	debootstrap erofs-utils            # sandbox images: built from Debian packages, named by digest
	gpgv debian-archive-keyring        # debootstrap checks the release signatures (only recommended by it)
	e2fsprogs                          # mkfs.ext4 formats each sandbox's workspace volume (native)
	bubblewrap                         # bench/bench_native compares provision latency with bwrap
	runsc                              # the gvisor mechanism's runtime (gVisor's OCI runtime; docs/guest.md)
	clang libclang-rt-14-dev           # libFuzzer targets (scripts/fuzz.sh)
)

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
# tests: airlock mcp's client is the official MCP TypeScript SDK
# (tests/mcp_sdk_test.sh installs it from npm under build/): node and npm
# from Debian, unless this machine already has both (a node that ships its
# own npm would conflict with Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The host's file table. A sandbox can hold one entry per 384 bytes of its
# memory limit (a file mapped and then closed keeps its entry with no
# descriptor; include/airlock/caps.h, AIRLOCK_HOST_FILE_CHARGE), and a
# provision is refused unless the table has room for that much
# (src/host/filetable.h): at the default 2 GiB, 5.6 million entries, more
# than the kernel's default fs.file-max (about one per 10 KiB of RAM).
# The entries are charged to the sandboxes' memory cgroups, so memory
# bounds them; systemd (since v240) sets this same value at every boot for
# that reason, and a host booted by another init keeps the small default.
sysctl_file=/etc/sysctl.d/60-airlock.conf
sysctl_text='# airlock (scripts/setup.sh): file-table entries are charged to memory
# cgroups, so memory bounds them; a sandbox at the default 2 GiB can hold
# 5.6 million (include/airlock/caps.h, AIRLOCK_HOST_FILE_CHARGE).
fs.file-max = 9223372036854775807'
if [ "$(cat "$sysctl_file" 2>/dev/null)" != "$sysctl_text" ]; then
	echo "setup: writing $sysctl_file"
	printf '%s\n' "$sysctl_text" | $sudo tee "$sysctl_file" >/dev/null
fi
if ! $sudo sysctl -q -p "$sysctl_file"; then
	echo "setup: WARNING: could not apply $sysctl_file; fs.file-max is" \
	     "$(cat /proc/sys/fs/file-max), and a native or gvisor provision whose memory" \
	     "limit needs more file-table room than that is refused (ExecutionUnavailable)" >&2
fi

if [ ! -f build/build.ninja ]; then
	meson setup build
fi
ninja -C build
