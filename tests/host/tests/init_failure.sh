# A failed init(DUMP) aborts the run before any task is touched; the
# plugins loaded before it get exit(DUMP, -1), it and later ones nothing.
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
B=$(plugin tp_b)
C=$(plugin tp_c)
start_target --open /dev/null --child
P=$TARGET_PID

TP_B_INIT=-1 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" --plugin "$C" &&
	fail "dump with a failing init succeeded"
ok "dump fails"
log_has "Error: Failed in init(0) of \"tp_b\"" || fail "no init failure message"
cat >"$T/expected" <<EOT
tp_a INIT(stage=0, imgdir=ok) = 0
tp_b INIT(stage=0, imgdir=ok) = -1
tp_a EXIT(stage=0, ret=-1)
EOT
expect_records "$T/expected"
ok "only init calls, then exit(DUMP, -1) of the plugins loaded before"
expect_running "$P"
expect_running "$TARGET_CHILD"
ok "tasks never seized"

# The same on restore.
: >"$REC"
host dump -t "$P" -D "$T/img" --plugin "$A" || fail "dump failed"
: >"$REC"
TP_A_INIT=-22 host restore -D "$T/img" --plugin "$A" && fail "restore with a failing init succeeded"
log_has "Error: Failed in init(2) of \"tp_a\"" || fail "no init failure message"
[ "$(records)" = "tp_a INIT(stage=2, imgdir=ok) = -22" ] || fail "calls after a failed init(RESTORE)"
ok "failed init(RESTORE) aborts the restore"
done_testing
