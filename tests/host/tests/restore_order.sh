# Restore in CRIU 4.x's order: init(RESTORE), RESTORE_INIT, POST_FORKING in
# the main process; RESTORE_EXT_FILE (retry honoured: called again after the
# others) in the task that owns the file, which the other tasks receive;
# RESUME_DEVICES_LATE per restored task in the main process; exit.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
# Two separate opens: two files (ids), both inherited by the child.
start_target --open "$DEV" --open "$DEV" --open /dev/null --child
P=$TARGET_PID C=$TARGET_CHILD

TP_A_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" --kill || fail "dump failed"
wait "$P" 2>/dev/null
expect_dead "$C"
ID1=$(sed -n 's/^fd task=[0-9]* fd=3 id=\([0-9]*\) kind=ext .*/\1/p' "$T/img/inventory.host" | head -n1)
ID2=$(sed -n 's/^fd task=[0-9]* fd=4 id=\([0-9]*\) kind=ext .*/\1/p' "$T/img/inventory.host" | head -n1)
[ -n "$ID1" ] && [ -n "$ID2" ] && [ "$ID1" != "$ID2" ] || fail "expected two plugin files"
ok "dump of two device files in two tasks"

: >"$REC"
TP_A_INVENTORY=1 TP_A_RESTORE_EXT_FILE=retry:/dev/zero host restore -D "$T/img" --plugin "$A" --plugin "$B" \
	--verifier "$HOST_VERIFIER:verify_fds" --verifier-arg "3=/dev/zero,4=/dev/zero,5=/dev/null" ||
	fail "restore failed"
ok "restore succeeds"

M=$(record_pid "INIT\(stage=2")
R1=$(sed -n "s/.*Task $P forked as \([0-9]*\)/\1/p" "$T/log")
R2=$(sed -n "s/.*Task $C forked as \([0-9]*\)/\1/p" "$T/log")
[ -n "$R1" ] && [ -n "$R2" ] || fail "restored pids not logged"
FD1=$(grep -F "RESTORE_EXT_FILE(id=$ID1, img=present) = " "$REC" | tail -n1 | sed 's/.* = //')
FD2=$(grep -F "RESTORE_EXT_FILE(id=$ID2, img=present) = " "$REC" | tail -n1 | sed 's/.* = //')
cat >"$T/expected" <<EOT
tp_a INIT(stage=2, imgdir=ok, inventory=listed) = 0
tp_b INIT(stage=2, imgdir=ok) = 0
tp_a RESTORE_INIT() = -95
tp_b RESTORE_INIT() = -95
tp_a POST_FORKING() = -95
tp_b POST_FORKING() = -95
tp_a RESTORE_EXT_FILE(id=$ID1, img=present) = 0 retry
tp_a RESTORE_EXT_FILE(id=$ID2, img=present) = 0 retry
tp_a RESTORE_EXT_FILE(id=$ID1, img=present) = $FD1
tp_a RESTORE_EXT_FILE(id=$ID2, img=present) = $FD2
tp_a RESUME_DEVICES_LATE(pid=$R1, alive=1) = -95
tp_b RESUME_DEVICES_LATE(pid=$R1, alive=1) = -95
tp_a RESUME_DEVICES_LATE(pid=$R2, alive=1) = -95
tp_b RESUME_DEVICES_LATE(pid=$R2, alive=1) = -95
tp_a EXIT(stage=2, ret=0)
tp_b EXIT(stage=2, ret=0)
EOT
expect_records "$T/expected"
[ "$FD1" -ge 0 ] && [ "$FD2" -ge 0 ] || fail "RESTORE_EXT_FILE did not return fds"
ok "hook order; retried files called again after the others; the child's copy is passed, not reopened"

for h in INIT RESTORE_INIT POST_FORKING RESUME_DEVICES_LATE EXIT; do
	[ "$(grep -E "^tp_[ab] [0-9]+ $h\(" "$REC" | awk '{print $2}' | sort -u)" = "$M" ] ||
		fail "$h not in the main process"
done
[ "$(grep -F RESTORE_EXT_FILE "$REC" | awk '{print $2}' | sort -u)" = "$R1" ] ||
	fail "RESTORE_EXT_FILE not in the restored root task"
ok "main-process hooks in the main process, RESTORE_EXT_FILE in the task"

grep -q "verify: task $P (restored as $R1): verify_fds() = 0 (pass)" "$T/log" || fail "root verifier"
grep -q "verify: task $C (restored as $R2): verify_fds() = 0 (pass)" "$T/log" || fail "child verifier"
ok "fds 3 and 4 (plugin files) and 5 (reopened) in place in both restored tasks"

# A RESTORE_INIT error aborts; -ENOTSUP does not (above).
: >"$REC"
TP_A_INVENTORY=1 TP_A_RESTORE_INIT=-5 host restore -D "$T/img" --plugin "$A" --plugin "$B" && fail "restore went on after RESTORE_INIT failed"
cat >"$T/expected" <<EOT
tp_a INIT(stage=2, imgdir=ok, inventory=listed) = 0
tp_b INIT(stage=2, imgdir=ok) = 0
tp_a RESTORE_INIT() = -5
tp_a EXIT(stage=2, ret=-1)
tp_b EXIT(stage=2, ret=-1)
EOT
expect_records "$T/expected"
ok "RESTORE_INIT error aborts the restore"

# A RESTORE_EXT_FILE error fails the restore; the tasks are killed.
: >"$REC"
TP_A_INVENTORY=1 TP_A_RESTORE_EXT_FILE=-5 host restore -D "$T/img" --plugin "$A" --plugin "$B" && fail "restore with a failing RESTORE_EXT_FILE succeeded"
log_has "Unable to restore $(printf '%#x' "$ID1")" || fail "no restore error"
[ -z "$(records_of RESUME_DEVICES_LATE)" ] || fail "RESUME_DEVICES_LATE after a failed task"
records | grep -qx "tp_a EXIT(stage=2, ret=-1)" || fail "exit(RESTORE) without error"
ok "RESTORE_EXT_FILE error fails the restore"

# Nobody restores the file: the same.
: >"$REC"
TP_A_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" && fail "restore of an unclaimed file succeeded"
ok "-ENOTSUP from every plugin fails the restore"

# POST_FORKING error.
: >"$REC"
TP_A_INVENTORY=1 TP_B_POST_FORKING=-5 TP_A_RESTORE_EXT_FILE=open:/dev/zero host restore -D "$T/img" --plugin "$A" --plugin "$B" &&
	fail "restore went on after POST_FORKING failed"
[ -z "$(records_of RESTORE_EXT_FILE)" ] || fail "files restored after POST_FORKING failed"
ok "POST_FORKING error aborts before files are restored"

# RESUME_DEVICES_LATE error.
: >"$REC"
TP_A_INVENTORY=1 TP_A_RESUME_DEVICES_LATE=-5 TP_A_RESTORE_EXT_FILE=open:/dev/zero host restore -D "$T/img" --plugin "$A" --plugin "$B" &&
	fail "restore succeeded with a failing RESUME_DEVICES_LATE"
records | grep -qx "tp_a EXIT(stage=2, ret=-1)" || fail "exit(RESTORE) without error"
ok "RESUME_DEVICES_LATE error fails the restore"
done_testing
