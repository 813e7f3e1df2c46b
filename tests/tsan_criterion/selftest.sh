#!/bin/sh
# Runs the TSan runner's self test (selftest.cpp) and checks its verdicts:
# exactly the tests meant to fail fail (the data race through TSan's report),
# one skips, two pass, and the run as a whole fails.
set -u
out=$("$1" --jobs 1 2>&1)
rc=$?
echo "$out"
fail=0
expect() { echo "$out" | grep -qF -- "$1" || { echo "selftest.sh: missing: $1"; fail=1; }; }
expect "[FAIL] selftest/assertion_fails: exit 1"
expect "[FAIL] selftest/expectation_fails: exit 1"
expect "[FAIL] selftest/data_race_is_reported: exit 66 (ThreadSanitizer reported)"
expect "[SKIP] selftest/skips"
expect "Synthesis: Tested: 6 | Passing: 2 | Failing: 3 | Skipped: 1"
[ "$rc" -ne 0 ] || { echo "selftest.sh: the runner exited 0 with failing tests"; fail=1; }
[ "$fail" -eq 0 ] && echo "selftest.sh: PASS"
exit "$fail"
