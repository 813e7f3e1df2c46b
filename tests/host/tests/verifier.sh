# The verifier runs in each restored task; its result decides the exit
# status of the restore.
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
start_target --open /dev/null --child
P=$TARGET_PID C=$TARGET_CHILD
host dump -t "$P" -D "$T/img" --plugin "$A" || fail "dump failed"

host restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:verify_pass" || fail "passing verifier failed"
[ "$(grep -c 'verify_pass() = 0 (pass)' "$T/log")" = 2 ] || fail "verifier did not run in both tasks"
ok "pass: exit status 0, both tasks report"

host restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:verify_fail" --verifier-arg 7 &&
	fail "failing verifier passed"
grep -q "verify: task $P (restored as [0-9]*): verify_fail() = 7 (FAIL)" "$T/log" || fail "root result"
grep -q "verify: task $C (restored as [0-9]*): verify_fail() = 7 (FAIL)" "$T/log" || fail "child result"
log_has "Verification FAILED." || fail "no failure line"
ok "fail: non-zero exit status, each task's result reported"

# The verifier runs inside the restored task, not in the main process.
host restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:verify_fds" --verifier-arg "3=/dev/null" ||
	fail "fd check failed in the restored tasks"
host restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:verify_fds" --verifier-arg "3=/dev/zero" &&
	fail "fd check passed for the wrong file"
ok "verifier sees the restored task's fds"

# Logging to stderr: the restore keeps it (and its own copy of it).
"$CRIU_HOST" restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:verify_fds" --verifier-arg 2 \
	2>"$T/stderr" || fail "restore logging to stderr failed (or fd 2 closed in the tasks)"
[ "$(grep -c 'verify_fds() = 0 (pass)' "$T/stderr")" = 2 ] || fail "results not on stderr"
ok "restore logging to stderr"

host restore -D "$T/img" --plugin "$A" --verifier "$HOST_VERIFIER:no_such_function" && fail "missing function passed"
host restore -D "$T/img" --plugin "$A" --verifier "$T/none.so:verify_pass" && fail "missing library passed"
ok "missing verifier library or function fails"
done_testing
