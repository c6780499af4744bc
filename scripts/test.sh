#!/usr/bin/env bash
# Run every test: the normal build, its static analysis, then the same suite
# under ASan+UBSan.
# Prints the skipped tests with their reasons, the probes that met no live
# target on this host, whether the cgroup v2 driver ran, and one closing
# line, "tests: N passed, N failed, N skipped". Exits non-zero on any
# failure, and on any skip this machine had no reason for: as root, with the
# image built, every native suite can run, so only a reason matching
# AIRLOCK_TEST_ALLOWED_SKIPS (a regular expression: mechanisms not installed
# here) may skip. Assumes scripts/setup.sh ran (the README's command does).
set -uo pipefail
cd "$(dirname "$0")/.."

status=0
run_suite() { # build dir, label
	if ! meson test -C "$1" --print-errorlogs --num-processes 2; then
		echo "test: $2 suite failed"
		status=1
	fi
}

ninja -C build || exit 1

# The native mechanism's suites run real sandboxes from the default image:
# build it once into the store (a few minutes on a new machine; nothing when
# it is there). A failure here fails the run: those suites would only skip.
export AIRLOCK_TEST_IMAGE_STORE=${AIRLOCK_TEST_IMAGE_STORE:-/var/lib/airlock/images}
if [ "$(id -u)" -eq 0 ]; then
	AIRLOCK_IMAGE_STORE=$AIRLOCK_TEST_IMAGE_STORE ./build/airlock image build --if-missing >/dev/null || {
		echo "test: building the default image failed"; exit 1; }
fi

run_suite build normal

# Static analysis (gcc -fanalyzer through scripts/analyze.py; one to two
# minutes on two cores): a finding not in scripts/analyzer.supp fails the run.
if ! ninja -C build analyze; then
	echo "test: static analysis has a new finding (above)"
	status=1
fi

# The ASan build is also the fault-injection build (src/util/fault.h): its
# failure-path suites fail each step in turn. An older build-asan
# directory is switched over.
asan_options="-Dsanitize=address,undefined -Dbuildtype=debug -Dfault_injection=true"
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan $asan_options >/dev/null || exit 1
elif [ "$(meson introspect build-asan --buildoptions |
          python3 -c 'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "fault_injection"] or ["absent"])')" != "[True]" ]; then
	# Configured before the option existed (absent), or without it.
	meson setup --reconfigure build-asan $asan_options >/dev/null || exit 1
fi
ninja -C build-asan || exit 1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
	run_suite build-asan asan+ubsan

# Criterion runs each test in a child and does not fail a test whose child
# LeakSanitizer or UBSan reported at exit, so the reports are searched for.
if grep -Eq 'ERROR: (Leak|Address)Sanitizer|runtime error:' build-asan/meson-logs/testlog.txt; then
	grep -E -B2 -A20 'ERROR: (Leak|Address)Sanitizer|runtime error:' build-asan/meson-logs/testlog.txt | head -80
	echo "test: sanitizer reports found in the asan+ubsan suite"
	status=1
fi

# Skips a machine that can run native may still have: mechanisms that are
# not installed here, facts of its kernel and disk, and the image-build
# tests when the operator turned them off on purpose. gvisor is installed
# by setup.sh: where runsc is there, a gvisor suite that skips is a failure.
if [ -x /usr/bin/runsc ]; then
	gvisor_skips=
else
	gvisor_skips='runsc|gVisor|gvisor|'
fi
ALLOWED_SKIPS=${AIRLOCK_TEST_ALLOWED_SKIPS:-${gvisor_skips}microvm|QEMU|/dev/kvm|ia32_emulation off|needs 5 GiB free|AIRLOCK_TEST_SKIP_IMAGE_BUILD is set}
# The cgroup v2 driver runs only where /sys/fs/cgroup is cgroup2; a hybrid
# host binds memory, pids and cpu to v1 hierarchies, and no v2 mount of our
# own can take them while those hierarchies hold cgroups.
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
	cgroup_v2=exercised
else
	cgroup_v2="not exercised on this host (hybrid cgroups: the controllers are bound to v1 hierarchies)"
fi
python3 - "$(id -u)" "$ALLOWED_SKIPS" "$cgroup_v2" build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, re, sys
uid, allowed, cgroup_v2 = int(sys.argv[1]), re.compile(sys.argv[2]), sys.argv[3]
passed = failed = skipped = 0
skips, unexplained, not_exercised, failures = [], [], set(), []
for path in sys.argv[4:]:
    label = "asan+ubsan" if "build-asan" in path else "normal"
    try:
        for line in open(path):
            r = json.loads(line)
            out = (r.get("stdout") or "") + (r.get("stderr") or "")
            lines = [l for l in out.splitlines() if l.startswith("SKIP ")]
            not_exercised.update(l for l in out.splitlines() if l.startswith("NOT-EXERCISED "))
            for l in lines:
                skips.append(f"{label}: {l[5:]}")
                if not allowed.search(l):
                    unexplained.append(skips[-1])
            skipped += len(lines)
            res = r.get("result")
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                if not lines:  # a skip that printed no reason is one too
                    skipped += 1
                    skips.append(f"{label}: {r.get('name')}: (no reason printed)")
                    unexplained.append(skips[-1])
            else:
                failed += 1
                # The closing lines are what a CI log keeps: name the suite
                # and the Criterion tests in it that failed.
                cases = [l.strip() for l in out.splitlines() if "[FAIL]" in l or "CRASH" in l]
                failures.append(f"{label}: {r.get('name')} ({res})" +
                                "".join(f"\n    {c[:300]}" for c in cases[:10]))
    except FileNotFoundError:
        failed += 1
        failures.append(f"{label}: {path} is missing (the suite did not run)")
for s in skips:
    print(f"skipped: {s}")
for n in sorted(not_exercised):
    print(f"not exercised: {n[len('NOT-EXERCISED '):]}")
print(f"cgroup v2 driver: {cgroup_v2}")
for f in failures:
    print(f"failed: {f}")
status = 1 if failed else 0
if uid == 0 and unexplained:
    print(f"test: {len(unexplained)} skipped without an allowed reason on a machine that can run them "
          f"(root, the image built; allowed: {allowed.pattern})")
    status = 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(status)
PY
[ $? -eq 0 ] || status=1
exit $status
