# Every thread is frozen before CHECKPOINT_DEVICES and released after; a
# zombie child gets PAUSE_DEVICES (CRIU asks before it knows) and nothing
# else.
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
start_target --open /dev/null --threads 3 --zombie --child
P=$TARGET_PID C=$TARGET_CHILD
# The main thread and its 3; a sanitizer runtime may add a thread of its own
# (ThreadSanitizer's background thread), which must be frozen too.
for i in $(seq 100); do
	[ "$(ls /proc/$P/task | wc -l)" -ge 4 ] && break
	sleep 0.02
done
N=$(ls /proc/$P/task | wc -l)
[ "$N" -ge 4 ] || fail "target threads not started"
Z=$(for c in $(cat /proc/$P/task/*/children); do
	[ "$(awk '/^State:/ {print $2}' /proc/$c/status)" = Z ] && echo "$c"
done)
[ -n "$Z" ] || fail "no zombie child"

host dump -t "$P" -D "$T/img" --plugin "$A" || fail "dump failed"
records | grep -qx "tp_a CHECKPOINT_DEVICES(pid=$P, traced=1) = -95" || fail "not every thread frozen"
log_has "Seized task $P ($N threads)" || fail "threads not counted"
ok "all $N threads frozen at CHECKPOINT_DEVICES"
records | grep -q "^tp_a PAUSE_DEVICES(pid=$Z, " || fail "no PAUSE_DEVICES for the zombie"
[ -z "$(records_of CHECKPOINT_DEVICES | grep "pid=$Z,")" ] || fail "CHECKPOINT_DEVICES for a zombie"
! grep -q "^task pid=$Z " "$T/img/inventory.host" || fail "zombie in the inventory"
grep -q "^task pid=$C ppid=$P" "$T/img/inventory.host" || fail "live child missing"
ok "zombie: PAUSE_DEVICES only, not in the inventory"
expect_running "$P"
expect_running "$C"
ok "all threads released"
done_testing
