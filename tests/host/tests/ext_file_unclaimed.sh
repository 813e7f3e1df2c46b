# A device file no plugin dumps fails the dump with CRIU's message; a
# negative DUMP_EXT_FILE fails it too; the task is left running.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open "$DEV"
P=$TARGET_PID
MODE=$(printf '%o' 0x$(stat -c %f "$DEV"))
RDEV="$((0x$(stat -c %t "$DEV"))):$((0x$(stat -c %T "$DEV")))"

host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" && fail "dump of an unclaimed device succeeded"
ok "dump fails"
log_has "Error: Can't dump file 3 of that type [$MODE] (chr $RDEV)" || fail "no 'Can't dump file' error"
ok "CRIU's 'Can't dump file N of that type' error"
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1 | tr '\n' ' ')" = "tp_a tp_b " ] || fail "not every plugin was asked"
[ -z "$(records_of DUMP_DEVICES_LATE)" ] || fail "DUMP_DEVICES_LATE after a failed task dump"
records | grep -qx "tp_a EXIT(stage=0, ret=-1)" || fail "exit(DUMP) without an error"
records | grep -qx "tp_b EXIT(stage=0, ret=-1)" || fail "exit(DUMP) without an error"
[ ! -f "$T/img/inventory.host" ] || fail "inventory written for a failed dump"
ok "no DUMP_DEVICES_LATE, exit(DUMP, -1), no inventory"
expect_running "$P"
ok "task runs"

: >"$REC"
TP_B_DUMP_EXT_FILE=-5 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" && fail "dump with a failing plugin succeeded"
! log_has "Can't dump file" || fail "a plugin error reported as unsupported file"
log_has "plugin tp_b returned -5" || fail "plugin error not reported"
records | grep -qx "tp_b EXIT(stage=0, ret=-1)" || fail "exit(DUMP) without an error"
ok "negative DUMP_EXT_FILE fails the dump"
expect_running "$P"
ok "task runs"
done_testing
