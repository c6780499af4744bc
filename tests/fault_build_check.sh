#!/bin/sh
# The fault-injection counter (src/util/fault.h) is in the library exactly
# when the build asked for it: usage: fault_build_check.sh LIBRARY yes|no.
# Without -Dfault_injection=true util_fault is an inline false, so no object
# defines util_fault_arm and none calls util_fault.
set -eu
lib=$1 want=$2
syms=$(nm -A "$lib" 2>/dev/null) || { echo "nm $lib failed"; exit 1; }
defined=no
echo "$syms" | grep -Eq ' T util_fault_arm$' && defined=yes
called=no
echo "$syms" | grep -Eq ' U util_fault$' && called=yes
if [ "$want" = no ]; then
	[ "$defined" = no ] || { echo "util_fault_arm is defined in a build without fault injection"; exit 1; }
	[ "$called" = no ] || { echo "an object calls util_fault in a build without fault injection:"; echo "$syms" | grep -E ' U util_fault$'; exit 1; }
	echo "no fault-injection counter in $lib"
else
	[ "$defined" = yes ] || { echo "the fault-injection build has no util_fault_arm in $lib"; exit 1; }
	echo "fault-injection counter compiled into $lib"
fi
