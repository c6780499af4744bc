#!/usr/bin/env bash
# Run every test: the normal build, then the same suite under ASan+UBSan.
# Prints one closing line, "tests: N passed, N failed", and exits non-zero on
# any failure. Assumes scripts/setup.sh ran (the README's command does that).
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

if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Dsanitize=address,undefined -Dbuildtype=debug >/dev/null || exit 1
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

python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = 0
for path in sys.argv[1:]:
    try:
        for line in open(path):
            r = json.loads(line)
            if r.get("result") in ("OK", "EXPECTEDFAIL", "SKIP"):
                passed += 1
            else:
                failed += 1
    except FileNotFoundError:
        failed += 1
print(f"tests: {passed} passed, {failed} failed")
PY
exit $status
