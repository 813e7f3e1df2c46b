# --kill: after a successful dump the whole tree is killed (threads too).
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
start_target --open /dev/null --child --threads 2
P=$TARGET_PID C=$TARGET_CHILD

host dump -t "$P" -D "$T/img" --plugin "$A" --kill || fail "dump failed"
ok "dump succeeds"
records | grep -qx "tp_a EXIT(stage=0, ret=0)" || fail "no exit(DUMP, 0)"
wait "$P"
[ $? = 137 ] || fail "root task not killed by SIGKILL"
expect_dead "$C"
ok "root and child killed"

# Default (and --leave-running): the tree runs on.
start_target --open /dev/null --child
host dump -t "$TARGET_PID" -D "$T/img2" --plugin "$A" --leave-running || fail "dump failed"
expect_running "$TARGET_PID"
expect_running "$TARGET_CHILD"
ok "--leave-running leaves the tree running"
done_testing
