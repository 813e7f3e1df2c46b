# Pre-dump: init(PRE_DUMP), PAUSE_DEVICES per task (the tasks are frozen
# after it), exit(PRE_DUMP, 0), the tasks run on; nothing else, no inventory.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
start_target --open "$DEV" --child
P=$TARGET_PID C=$TARGET_CHILD

host pre-dump -t "$P" -D "$T/img" --plugin "$A" --kill || fail "pre-dump failed"
cat >"$T/expected" <<EOT
tp_a INIT(stage=1, imgdir=ok) = 0
tp_a PAUSE_DEVICES(pid=$P, traced=0) = -95
tp_a PAUSE_DEVICES(pid=$C, traced=0) = -95
tp_a EXIT(stage=1, ret=0)
EOT
expect_records "$T/expected"
[ ! -f "$T/img/inventory.host" ] || fail "pre-dump wrote an inventory"
expect_running "$P"
expect_running "$C"
ok "only init, PAUSE_DEVICES and exit; tasks run on (--kill ignored)"

: >"$REC"
TP_A_PAUSE_DEVICES=-5 host pre-dump -t "$P" -D "$T/img" --plugin "$A" && fail "failing pre-dump succeeded"
records | grep -qx "tp_a EXIT(stage=1, ret=-1)" || fail "no exit(PRE_DUMP, -1)"
log_has "Pre-dumping FAILED." || fail "no failure line"
expect_running "$P"
ok "PAUSE_DEVICES error fails the pre-dump; tasks run on"
done_testing
