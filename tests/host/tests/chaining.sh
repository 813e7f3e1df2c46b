# run_plugins(): plugins are called in load order until one answers other
# than -ENOTSUP; a hook a plugin did not register skips it.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open "$DEV"
P=$TARGET_PID

run() {
	: >"$REC"
	rm -rf "$T/img"
	host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B"
}

# The first claim wins: tp_b never sees the file.
TP_A_DUMP_EXT_FILE=0 TP_B_DUMP_EXT_FILE=0 run || fail "dump failed"
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1)" = tp_a ] || fail "DUMP_EXT_FILE went past the claiming plugin"
ok "first 0 stops the chain"

# -ENOTSUP passes the call on; the one that claims is in the inventory.
TP_B_DUMP_EXT_FILE=0 run || fail "dump failed"
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1 | tr '\n' ' ')" = "tp_a tp_b " ] || fail "chain order"
grep -qx "plugin name=tp_b" "$T/img/inventory.host" || fail "claimer tp_b not in the inventory"
! grep -q "plugin name=tp_a" "$T/img/inventory.host" || fail "tp_a in the inventory"
ok "-ENOTSUP passes on to the next plugin"

# A positive result also stops the chain (anything but -ENOTSUP).
TP_A_DUMP_EXT_FILE=0 TP_A_DUMP_DEVICES_LATE=0 run || fail "dump failed"
[ "$(records_of DUMP_DEVICES_LATE | cut -d' ' -f1)" = tp_a ] || fail "DUMP_DEVICES_LATE reached tp_b after tp_a returned 0"
ok "a plugin returning 0 from DUMP_DEVICES_LATE hides it from the next"

TP_A_DUMP_EXT_FILE=0 run || fail "dump failed"
[ "$(records_of DUMP_DEVICES_LATE | cut -d' ' -f1 | tr '\n' ' ')" = "tp_a tp_b " ] || fail "tp_b did not get DUMP_DEVICES_LATE"
ok "-ENOTSUP from DUMP_DEVICES_LATE lets the next plugin have it"

# An unregistered hook is not called; the next plugin still is.
TP_A_UNREGISTER=DUMP_EXT_FILE,PAUSE_DEVICES TP_B_DUMP_EXT_FILE=0 run || fail "dump failed"
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1)" = tp_b ] || fail "unregistered DUMP_EXT_FILE called"
[ "$(records_of PAUSE_DEVICES | cut -d' ' -f1)" = tp_b ] || fail "unregistered PAUSE_DEVICES called"
ok "unregistered hooks are skipped"

# Load order is command-line order.
: >"$REC"
rm -rf "$T/img"
TP_A_DUMP_EXT_FILE=0 TP_B_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --plugin "$B" --plugin "$A" || fail "dump failed"
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1)" = tp_b ] || fail "order not as given"
[ "$(records | head -n1 | cut -d' ' -f1)" = tp_b ] || fail "init order"
ok "--plugin order is load order"

# --libdir: every *.so, in readdir order.
mkdir "$T/libs"
cp "$A" "$T/libs/tp_a.so"
cp "$B" "$T/libs/tp_b.so"
cp "$TEST_PLUGIN" "$T/libs/tp_c.so"
echo "not a plugin" >"$T/libs/readme.txt"
: >"$REC"
rm -rf "$T/img"
TP_A_DUMP_EXT_FILE=0 TP_B_DUMP_EXT_FILE=0 TP_C_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --libdir "$T/libs" || fail "dump failed"
ORDER=$(ls -f "$T/libs" | grep '\.so$' | sed 's/\.so$//' | tr '\n' ' ')
GOT=$(records_of INIT | cut -d' ' -f1 | tr '\n' ' ')
[ "$ORDER" = "$GOT" ] || fail "libdir load order '$GOT', readdir order '$ORDER'"
FIRST=${ORDER%% *}
[ "$(records_of DUMP_EXT_FILE | cut -d' ' -f1)" = "$FIRST" ] || fail "first loaded plugin did not win"
ok "--libdir loads every .so in readdir order"

expect_running "$P"
done_testing
