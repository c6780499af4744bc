#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The files airlock puts in every image (include/airlock/guest.h), checked
# from the build's outputs on the host, without an image or a sandbox:
#   - the guest program is static (no program interpreter: the image's
#     loader and its ld.so.preload never touch it) and the shim exports the
#     five wrappers and needs nothing but libc;
#   - guest exec, run as an unprivileged uid of its own: the command's
#     status, its background processes gone when it returns, 127 with the
#     exact message for a name that cannot be executed (escaped and cut),
#     128 + signal, refusal as root; guest kill ends that uid's processes;
#   - the shim under LD_PRELOAD changes nothing on Linux: stat, ls -l and
#     python3's os.stat give what they give without it, and (with strace)
#     statx reaches the kernel without AT_NO_AUTOMOUNT.
#
# usage: guest_test.sh GUEST SHIM READELF NM
set -eu
guest=$(readlink -f "$1") shim=$(readlink -f "$2") readelf=$3 nm=$4
tmp=$(mktemp -d)
chmod 0755 "$tmp"
bg=""
cleanup() {
	[ -z "$bg" ] || kill -KILL "$bg" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() {
	echo "guest_test: FAIL: $*" >&2
	fails=$((fails + 1))
}
ok() {
	echo "guest_test: ok: $*"
}

# ---- the build outputs --------------------------------------------------------

if "$readelf" -l "$guest" | grep -q INTERP; then
	fail "$guest has a program interpreter (not static)"
else
	ok "guest is static"
fi
if "$readelf" -d "$guest" 2>/dev/null | grep -q NEEDED; then
	fail "$guest needs shared libraries"
fi
"$nm" -D --defined-only "$shim" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort -u \
	>"$tmp/exported"
for sym in statx fstatat fstatat64 __fxstatat __fxstatat64; do
	grep -qx "$sym" "$tmp/exported" || fail "the shim does not export $sym"
done
# libc only: a sanitizer runtime or a project library would not be in the image.
needed=$("$readelf" -d "$shim" | awk '/NEEDED/ { print $NF }' | tr -d '[]' | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || fail "the shim needs '$needed', not just libc.so.6"
ok "shim exports $(tr '\n' ' ' <"$tmp/exported")and needs $needed"

# ---- guest exec and guest kill on the host --------------------------------------

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null 2>&1; then
	echo "guest_test: the exec and kill checks need root and setpriv (util-linux) to become a uid of their own" >&2
	[ "$fails" -eq 0 ] || exit 1
	exit 77
fi
# A uid nothing else uses: guest exec kills every process of its uid when
# the command ends. Above the native mechanism's host ids (1500000000 +
# 65536, src/exec/native/service.h), one per run of this script.
uid=$((2600000000 + $$ % 1000000))
as_uid() {
	timeout 60 setpriv --reuid "$uid" --regid "$uid" --clear-groups --inh-caps=-all \
		--bounding-set=-all "$@"
}
# The uid's live processes (zombies excluded: they are gone, only not yet
# waited for), from /proc as guest kill reads it.
uid_procs() {
	for s in /proc/[0-9]*/status; do
		awk -v u="$uid" '$1 == "State:" { st = $2 } $1 == "Uid:" { id = $2 }
			END { if (id == u && st != "Z" && st != "X") print FILENAME }' "$s" 2>/dev/null ||
			true # it exited while the loop ran
	done
}
now_ms() {
	awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime
}
# Seccomp programs for guest exec --seccomp (struct sock_filter as
# little-endian hex: code u16, jt, jf, k u32). allow: RET_ALLOW alone.
# deny_unshare: unshare answers EPERM (RET_ERRNO | 1), everything else
# RET_ALLOW; the number is the architecture's.
allow=060000000000ff7f
case $(uname -m) in
x86_64) unshare_nr=10010000 ;;  # 272
aarch64) unshare_nr=61000000 ;; # 97
*) unshare_nr="" ;;
esac
deny_unshare=2000000000000000"15000001${unshare_nr}"0600000001000500$allow

# The command's status, and nothing of it left: the background sleep would
# outlive the shell by 30 s without the wrapper's kill.
mkdir "$tmp/w"
chown "$uid:$uid" "$tmp/w"
t0=$(now_ms)
rc=0
as_uid "$guest" exec --seccomp "$allow" -- /bin/sh -c 'sleep 30 & echo $! >"$1/bg.pid"; exit 5' sh "$tmp/w" \
	2>"$tmp/err" || rc=$?
t1=$(now_ms)
[ "$rc" -eq 5 ] || fail "exec of 'sleep 30 & exit 5' returned $rc, not 5: $(cat "$tmp/err")"
[ $((t1 - t0)) -lt 10000 ] || fail "exec of 'sleep 30 & exit 5' took $((t1 - t0)) ms"
[ -s "$tmp/w/bg.pid" ] || fail "the command did not run (no bg.pid)"
left=$(uid_procs)
[ -z "$left" ] || fail "processes of uid $uid left after exec: $left"
pid=$(cat "$tmp/w/bg.pid" 2>/dev/null || echo 0)
if [ "$pid" -gt 0 ] && [ -e "/proc/$pid" ] &&
	awk -v u="$uid" '$1 == "Uid:" && $2 == u { f = 1 } END { exit !f }' "/proc/$pid/status" 2>/dev/null; then
	fail "the background sleep ($pid) is still there"
fi
[ "$rc" -ne 5 ] || ok "exec: status 5 in $((t1 - t0)) ms, the background sleep gone"

# Output passes through; 128 + the signal that ended the command.
out=$(as_uid "$guest" exec --seccomp "$allow" -- echo hello 2>&1) || fail "exec echo failed"
[ "$out" = "hello" ] || fail "exec echo printed '$out'"
rc=0
as_uid "$guest" exec --seccomp "$allow" -- /bin/sh -c 'kill -KILL $$' 2>/dev/null || rc=$?
[ "$rc" -eq 137 ] || fail "a command killed by SIGKILL gave $rc, not 137"
# A bare name is found in the sandbox's fixed PATH, not the caller's.
rc=0
as_uid env PATH=/nonexistent "$guest" exec --seccomp "$allow" -- true 2>"$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "'true' with PATH=/nonexistent gave $rc: $(cat "$tmp/err")"
ok "exec: output, 128 + signal, the fixed PATH"

# A name that cannot be executed: 127 and the exact message.
expect_failed() {
	want=$1
	shift
	rc=0
	as_uid "$guest" exec --seccomp "$allow" -- "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	[ "$rc" -eq 127 ] || fail "exec of a missing name gave $rc, not 127"
	printf '%s\n' "$want" >"$tmp/want"
	cmp -s "$tmp/want" "$tmp/err" || fail "exec's message: got '$(cat "$tmp/err")', want '$want'"
}
expect_failed "airlock: cannot execute no-such-program-4711: No such file or directory" \
	no-such-program-4711
expect_failed "airlock: cannot execute /etc/passwd: Permission denied" /etc/passwd
# A backslash, a tab and an escape byte, then x to 250 bytes (under NAME_MAX,
# so the lookup fails with ENOENT): escaped, and cut at 200 bytes.
name=$(printf 'a\\b\tc\033')$(printf '%244s' '' | tr ' ' x)
want_name="a\\x5cb\\x09c\\x1b$(printf '%194s' '' | tr ' ' x)...(250 bytes)"
expect_failed "airlock: cannot execute $want_name: No such file or directory" "$name"
ok "exec: 127 and the messages, escaped and cut"

# The filter: the one given is what the command runs under. unshare -U,
# which this host lets an unprivileged uid do, answers EPERM under a filter
# that denies it; a program that is not whole instructions is refused
# before anything runs; without --seccomp there is no command at all.
if [ -n "$unshare_nr" ] && as_uid unshare -U true 2>/dev/null; then
	rc=0
	as_uid "$guest" exec --seccomp "$allow" -- unshare -U true 2>"$tmp/err" || rc=$?
	[ "$rc" -eq 0 ] || fail "unshare -U under the allow-all filter gave $rc: $(cat "$tmp/err")"
	rc=0
	as_uid "$guest" exec --seccomp "$deny_unshare" -- unshare -U true 2>"$tmp/err" || rc=$?
	[ "$rc" -ne 0 ] && grep -q "Operation not permitted" "$tmp/err" ||
		fail "unshare -U under a filter denying it gave $rc: $(cat "$tmp/err")"
	ok "exec: the command runs under the filter given"
else
	echo "guest_test: NOT-EXERCISED: this host refuses unshare -U to an unprivileged uid" >&2
fi
for bad in "" 06 "${allow}0" "060000000000FF7F" "06000000000gff7f"; do
	rc=0
	as_uid "$guest" exec --seccomp "$bad" -- /bin/sh -c 'echo ran' >"$tmp/out" 2>"$tmp/err" || rc=$?
	[ "$rc" -eq 127 ] && [ ! -s "$tmp/out" ] && grep -q "takes a seccomp program" "$tmp/err" ||
		fail "exec with the program '$bad' gave $rc: $(cat "$tmp/out" "$tmp/err")"
done
rc=0
as_uid "$guest" exec -- /bin/sh -c 'echo ran' >"$tmp/out" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] || fail "exec without --seccomp gave $rc"
ok "exec: a malformed program or none is refused, nothing runs"

# Never as root: kill(-1) from root ends every process it can see.
rc=0
"$guest" exec --seccomp "$allow" -- /bin/true 2>"$tmp/err" || rc=$?
[ "$rc" -eq 127 ] && grep -q "refusing to run as root" "$tmp/err" ||
	fail "exec as root gave $rc: $(cat "$tmp/err")"
# Usage.
rc=0
"$guest" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q '^usage: guest' "$tmp/err" || fail "no arguments gave $rc"
rc=0
"$guest" exec ls 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "exec without -- gave $rc"
rc=0
"$guest" kill 12a 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "kill of a malformed uid gave $rc"
# Not uid 0: its killers would keep root's capabilities and kill everything.
rc=0
"$guest" kill 0 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "nonzero" "$tmp/err" || fail "kill of uid 0 gave $rc: $(cat "$tmp/err")"
ok "exec refuses root; usage"

# guest kill: a process of the uid (a shell with a child) ends by SIGKILL.
setpriv --reuid "$uid" --regid "$uid" --clear-groups sh -c 'sleep 60 & wait' &
bg=$!
i=0
while [ -z "$(uid_procs)" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -n "$(uid_procs)" ] || fail "the process for guest kill did not start"
rc=0
timeout 30 "$guest" kill "$uid" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "guest kill $uid gave $rc: $(cat "$tmp/err")"
st=0
wait "$bg" || st=$?
bg=""
[ "$st" -eq 137 ] || fail "the process guest kill should have killed exited with $st"
i=0
while [ -n "$(uid_procs)" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -z "$(uid_procs)" ] || fail "processes of $uid survived guest kill: $(uid_procs)"
# A process that forks as fast as it can (RLIMIT_NPROC bounds it; the uid is
# this script's alone): the passes end the whole tree.
if command -v prlimit >/dev/null 2>&1; then
	prlimit --nproc=200 setpriv --reuid "$uid" --regid "$uid" --clear-groups \
		sh -c 'while :; do sleep 60 & done' 2>/dev/null &
	bg=$!
	sleep 0.3
	[ -n "$(uid_procs)" ] || fail "the fork loop for guest kill did not start"
	rc=0
	timeout 30 "$guest" kill "$uid" 2>"$tmp/err" || rc=$?
	[ "$rc" -eq 0 ] || fail "guest kill of a fork loop gave $rc: $(cat "$tmp/err")"
	wait "$bg" 2>/dev/null || true
	bg=""
	sleep 0.2
	[ -z "$(uid_procs)" ] || fail "processes of the fork loop survived guest kill: $(uid_procs | wc -l)"
fi
# Nothing of the uid: done at once.
rc=0
timeout 10 "$guest" kill "$uid" || rc=$?
[ "$rc" -eq 0 ] || fail "guest kill with nothing to kill gave $rc"
ok "kill: the uid's processes ended"

# ---- the shim on Linux: no change ------------------------------------------------

# A tree of this script's: nothing else changes its times between two runs
# (/ has /tmp in it, whose times change whenever anyone makes a file).
fixed="$tmp/fixed"
mkdir -p "$fixed/d"
echo data >"$fixed/f"
ln -s f "$fixed/l"
chmod 0640 "$fixed/f"
# stat's format leaves out the access time, which reading a link changes.
for cmd in "stat -c %n:%s:%a:%u:%g:%Y:%i:%F:%N $fixed/f $fixed/l $fixed/d" \
	"stat -L -c %n:%s:%F $fixed/l" "ls -l $fixed" "ls -la /usr/bin/env" \
	"find $fixed -printf %p:%s:%m:%y\n"; do
	# shellcheck disable=SC2086
	a=$(LC_ALL=C $cmd 2>&1) || fail "$cmd failed without the shim"
	# shellcheck disable=SC2086
	b=$(LC_ALL=C LD_PRELOAD=$shim $cmd 2>&1) || fail "$cmd failed under the shim: $b"
	[ "$a" = "$b" ] || fail "$cmd differs under the shim: '$a' vs '$b'"
done
py='import os, sys; s = os.stat(sys.argv[1]); print(s.st_ino, s.st_mode, s.st_mtime_ns, os.lstat(sys.argv[2]).st_mode)'
a=$(python3 -c "$py" "$fixed/f" "$fixed/l") && b=$(LD_PRELOAD=$shim python3 -c "$py" "$fixed/f" "$fixed/l") &&
	[ "$a" = "$b" ] ||
	fail "python3's os.stat differs or fails under the shim"
# A missing file is still ENOENT, reported as libc reports it.
out=$(LC_ALL=C LD_PRELOAD=$shim stat /nonexistent-4711 2>&1) && fail "stat of a missing file succeeded"
case $out in
*"No such file or directory"*) ;;
*) fail "stat of a missing file under the shim said: $out" ;;
esac
if command -v strace >/dev/null 2>&1; then
	LC_ALL=C LD_PRELOAD=$shim strace -e trace=statx -o "$tmp/trace" stat / >/dev/null
	grep -q 'statx(AT_FDCWD, "/"' "$tmp/trace" || fail "stat / made no statx call: $(cat "$tmp/trace")"
	if grep 'statx(AT_FDCWD, "/"' "$tmp/trace" | grep -q AT_NO_AUTOMOUNT; then
		fail "AT_NO_AUTOMOUNT reached the kernel under the shim: $(cat "$tmp/trace")"
	fi
	LC_ALL=C strace -e trace=statx -o "$tmp/trace" stat / >/dev/null
	grep -q AT_NO_AUTOMOUNT "$tmp/trace" ||
		echo "guest_test: note: stat / passes no AT_NO_AUTOMOUNT here even without the shim"
fi
ok "shim: stat, ls -l, find, python3 unchanged"

[ "$fails" -eq 0 ] || exit 1
