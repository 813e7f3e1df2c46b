# A failure in the middle of a dump: no DUMP_DEVICES_LATE (unless it is the
# failure), exit(DUMP, ret != 0), and the tasks resumed alive -- --kill or
# not.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open "$DEV" --child
P=$TARGET_PID C=$TARGET_CHILD

case_fails() {
	local what=$1
	shift
	: >"$REC"
	rm -rf "$T/img"
	env "$@" "$CRIU_HOST" dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" --kill -v4 -o "$T/log" &&
		fail "$what: dump succeeded"
	records | grep -qx "tp_a EXIT(stage=0, ret=-1)" || fail "$what: exit(DUMP) without an error"
	records | grep -qx "tp_b EXIT(stage=0, ret=-1)" || fail "$what: exit(DUMP) without an error"
	[ ! -f "$T/img/inventory.host" ] || fail "$what: inventory written"
	log_has "Dumping FAILED." || fail "$what: no failure line"
	expect_running "$P"
	expect_running "$C"
	ok "$what: exit(DUMP, -1), tasks resumed (despite --kill)"
}

case_fails "PAUSE_DEVICES error" TP_A_DUMP_EXT_FILE=0 TP_B_PAUSE_DEVICES=-5
case_fails "CHECKPOINT_DEVICES error" TP_A_DUMP_EXT_FILE=0 TP_A_CHECKPOINT_DEVICES=-5
[ -z "$(records_of DUMP_EXT_FILE)" ] || fail "files dumped after CHECKPOINT_DEVICES failed"
case_fails "DUMP_EXT_FILE error" TP_A_DUMP_EXT_FILE=-12
[ -z "$(records_of DUMP_DEVICES_LATE)" ] || fail "DUMP_DEVICES_LATE after a failed task"
ok "no DUMP_DEVICES_LATE after a task failed"
case_fails "DUMP_DEVICES_LATE error" TP_A_DUMP_EXT_FILE=0 TP_B_DUMP_DEVICES_LATE=-5
case_fails "DUMP_DEVICES_LATE positive" TP_A_DUMP_EXT_FILE=0 TP_A_DUMP_DEVICES_LATE=1

# -ENOTSUP from PAUSE/CHECKPOINT/DUMP_DEVICES_LATE is no error.
: >"$REC"
TP_A_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" || fail "dump failed"
expect_running "$P"
ok "-ENOTSUP everywhere but the claimed file: success"
done_testing
