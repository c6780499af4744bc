#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# world.sh CMD [ARGS...]: run CMD inside a fresh network namespace wired to
# the egress tests' small internet (tests/egress_world.h: the same hosts,
# names and servers, from testhost.py). CMD sees EGRESS_WORLD_DIR, the
# world's temporary directory (ca.pem, rebind-queries.log, dnsmasq.log).
# Everything is torn down afterwards; the exit status is CMD's (2 when the
# world could not be set up).
#
# Only 198.51.100.0/24 is assigned, and only in namespaces made here: the
# caller's namespace is never touched (we re-run ourselves under unshare -n
# first).
set -u

here=$(cd "$(dirname "$0")" && pwd)

if [ "${EGRESS_WORLD_INNER:-}" != 1 ]; then
	if [ $# -lt 1 ]; then
		echo "usage: world.sh CMD [ARGS...]" >&2
		exit 2
	fi
	EGRESS_WORLD_INNER=1 exec unshare -n -- sh "$here/world.sh" "$@"
	echo "world.sh: unshare -n failed" >&2
	exit 2
fi
unset EGRESS_WORLD_INNER

ip=
for c in /usr/sbin/ip /sbin/ip /usr/bin/ip; do
	if [ -x "$c" ]; then ip=$c; break; fi
done
if [ -z "$ip" ]; then
	echo "world.sh: ip not found" >&2
	exit 2
fi

dir=$(mktemp -d /tmp/egress-world.XXXXXX) || exit 2
host=
cmd=

# True while pid is a live (not yet reaped, not zombie) process.
alive() {
	[ -r "/proc/$1/stat" ] || return 1
	state=$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

# TERM pid, and KILL it if it has not gone within 5 s; then reap it.
end() {
	kill -TERM "$1" 2>/dev/null
	i=0
	while alive "$1" && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

cleanup() {
	if [ -n "$cmd" ]; then
		end "$cmd"
		cmd=
	fi
	if [ -n "$host" ]; then
		end "$host"
		host=
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
	echo "world.sh: $*" >&2
	exit 2
}

# The host side: its own namespace (unshare -n execs python3 in place, so $!
# is the host's pid), waiting for the veth peer we move there.
unshare -n -- python3 "$here/testhost.py" --dir "$dir" --ready-file "$dir/ready" \
	--parent-pid $$ --wait-link 10 </dev/null &
host=$!

# The peer must go into the host's namespace, not ours: wait until the
# host has actually unshared (bounded) before naming its pid.
self_ns=$(readlink /proc/$$/ns/net)
i=0
while :; do
	ns=$(readlink "/proc/$host/ns/net" 2>/dev/null) || fail "testhost exited early"
	[ "$ns" != "$self_ns" ] && break
	[ $i -ge 100 ] && fail "testhost did not unshare its namespace"
	sleep 0.05
	i=$((i + 1))
done

"$ip" link set lo up || fail "lo up"
"$ip" link add al0 type veth peer name al1 netns "$host" || fail "veth"
"$ip" addr add 198.51.100.1/24 dev al0 || fail "address"
"$ip" link set al0 up || fail "al0 up"

# Ready: testhost has checked every server from its side (bounded, 20 s) ...
i=0
while [ ! -e "$dir/ready" ]; do
	alive "$host" || fail "testhost exited before it was ready"
	[ $i -ge 200 ] && fail "testhost not ready within 20 s"
	sleep 0.1
	i=$((i + 1))
done
# ... and a host answers across the link from this side.
python3 - <<'PY' || fail "198.51.100.2 unreachable from the caller's side"
import socket, time
deadline = time.monotonic() + 5
while True:
    try:
        socket.create_connection(("198.51.100.2", 9001), timeout=0.5).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
PY

EGRESS_WORLD_DIR=$dir
export EGRESS_WORLD_DIR
# In the background so a TERM or INT to us is handled at once (a shell runs
# traps only between commands, and wait is interruptible), with our stdin
# (an asynchronous command would get /dev/null).
exec 3<&0
"$@" <&3 3<&- &
cmd=$!
exec 3<&-
wait "$cmd"
status=$?
cmd=
exit $status
