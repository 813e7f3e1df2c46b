# Dump of a parent + child holding a device CRIU does not handle: hooks in
# CRIU 4.x's order, from the right processes, with the host's own fd copy;
# the inventory; the tasks keep running.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open /dev/null --open "$DEV" --child
P=$TARGET_PID C=$TARGET_CHILD

export TP_A_DUMP_EXT_FILE=0 TESTPLUGIN_WATCH_PATH=$DEV
host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" || fail "dump failed"
ok "dump succeeds"

ID=$(sed -n "s/.*DUMP_EXT_FILE(fd=[0-9]*, id=\([0-9]*\), .*/\1/p" "$REC")
[ -n "$ID" ] || fail "no DUMP_EXT_FILE"
LFD=$(sed -n "s/.*DUMP_EXT_FILE(fd=\([0-9]*\), .*/\1/p" "$REC")
cat > "$T/expected" <<EOT
tp_a INIT(stage=0, imgdir=ok) = 0
tp_b INIT(stage=0, imgdir=ok) = 0
tp_a PAUSE_DEVICES(pid=$P, traced=0) = -95
tp_b PAUSE_DEVICES(pid=$P, traced=0) = -95
tp_a PAUSE_DEVICES(pid=$C, traced=0) = -95
tp_b PAUSE_DEVICES(pid=$C, traced=0) = -95
tp_a CHECKPOINT_DEVICES(pid=$P, traced=1) = -95
tp_b CHECKPOINT_DEVICES(pid=$P, traced=1) = -95
tp_a CHECKPOINT_DEVICES(pid=$C, traced=1) = -95
tp_b CHECKPOINT_DEVICES(pid=$C, traced=1) = -95
tp_a DUMP_EXT_FILE(fd=$LFD, id=$ID, path=$DEV) = 0
tp_a DUMP_DEVICES_LATE(pid=$P, traced=1, watched_fds=0) = -95
tp_b DUMP_DEVICES_LATE(pid=$P, traced=1, watched_fds=0) = -95
tp_a EXIT(stage=0, ret=0)
tp_b EXIT(stage=0, ret=0)
EOT
expect_records "$T/expected"
ok "hook order, args, frozen state, one DUMP_EXT_FILE for the shared file"

# Every record comes from the host process itself.
[ "$(awk '{print $2}' "$REC" | sort -u | wc -l)" = 1 ] || fail "hooks ran in several processes"
ok "hooks run in the host process"

log_has "plugin tp_a: DUMP_EXT_FILE(fd=$LFD, id=$ID) = 0" || fail "hook call not logged"
log_has "tp_a: init stage 0" || fail "plugin's print_on_level line missing"
ok "log has the hook calls and the plugin's own lines"

INV=$T/img/inventory.host
grep -qx "plugin name=tp_a" "$INV" || fail "inventory does not list tp_a"
! grep -q "plugin name=tp_b" "$INV" || fail "inventory lists tp_b, which claimed nothing"
grep -qx "root pid=$P" "$INV" || fail "inventory root"
grep -qx "task pid=$P ppid=0" "$INV" || fail "inventory root task"
grep -qx "task pid=$C ppid=$P" "$INV" || fail "inventory child task"
[ "$(grep -c "fd=4 id=$ID kind=ext .*path=$DEV\$" "$INV")" = 2 ] || fail "device fd not recorded in both tasks"
[ "$(grep "kind=ext" "$INV" | grep -c " id=$ID ")" = 2 ] || fail "shared file has different ids"
grep -qx "fd task=$P fd=3 id=[0-9]* kind=reg flags=0100002 cloexec=0 pos=0 path=/dev/null" "$INV" || fail "/dev/null not a CRIU-handled file"
[ -f "$T/img/tp_a-$ID.img" ] || fail "plugin could not write into criu_get_image_dir()"
ok "inventory: plugins, tasks, fds, ids"

expect_running "$P"
expect_running "$C"
ok "tasks run untraced after the dump"
done_testing
