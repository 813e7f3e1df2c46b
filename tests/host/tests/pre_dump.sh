# Pre-dump, as CRIU 4.2.1 and criu-dev run it (docs/incremental.md):
# init(PRE_DUMP), PAUSE_DEVICES per task (the tasks are frozen after it),
# HANDLE_DEVICE_VMA per device mapping, no exit, the tasks run on; nothing
# else, no inventory. A device mapping no plugin claims fails the pre-dump.
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
EOT
expect_records "$T/expected"
[ ! -f "$T/img/inventory.host" ] || fail "pre-dump wrote an inventory"
expect_running "$P"
expect_running "$C"
ok "only init and PAUSE_DEVICES, no exit; tasks run on (--kill ignored)"

: >"$REC"
TP_A_PAUSE_DEVICES=-5 host pre-dump -t "$P" -D "$T/img" --plugin "$A" && fail "failing pre-dump succeeded"
! records | grep -q "EXIT" || fail "exit called in a failed pre-dump"
log_has "Pre-dumping FAILED." || fail "no failure line"
expect_running "$P"
ok "PAUSE_DEVICES error fails the pre-dump, no exit; tasks run on"
kill "$P" "$C" 2>/dev/null; wait "$P" 2>/dev/null

# A device mapping (the emulator's control command answering as its daemon
# does, as in device_vma): HANDLE_DEVICE_VMA, claimed or the pre-dump fails.
start_target --memfd-map 8192 --open "$DEV"
P=$TARGET_PID MAP=$TARGET_MAP
fake_vmas_kfd_emu "$DEV"
: >"$REC"
host pre-dump -t "$P" -D "$T/img" --plugin "$A" && fail "pre-dump with an unclaimed device mapping succeeded"
log_has "Error: Can't handle non-regular mapping on $P's map ${MAP#0x}" || fail "no non-regular mapping error"
! records | grep -q "EXIT" || fail "exit called in a failed pre-dump"
expect_running "$P"
ok "an unclaimed device mapping fails the pre-dump; task runs"
: >"$REC"
TP_A_HANDLE_DEVICE_VMA=0 host pre-dump -t "$P" -D "$T/img" --plugin "$A" || fail "pre-dump failed"
[ "$(records | sed 's/(fd=[0-9]*,/(fd=N,/')" = "tp_a INIT(stage=1, imgdir=ok) = 0
tp_a PAUSE_DEVICES(pid=$P, traced=0) = -95
tp_a HANDLE_DEVICE_VMA(fd=N, rdev=$((0x$(stat -c %t "$DEV"))):$((0x$(stat -c %T "$DEV"))), chr=1, path=/memfd:host-target (deleted)) = 0" ] ||
	fail "pre-dump hooks: $(records)"
[ ! -f "$T/img/inventory.host" ] || fail "pre-dump wrote an inventory"
expect_running "$P"
ok "init, PAUSE_DEVICES, HANDLE_DEVICE_VMA claimed, no exit, no inventory; task runs"
done_testing
