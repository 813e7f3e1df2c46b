# The inventory names the plugins that claimed something at dump (and those
# that called add_inventory_plugin()); restore without one of them fails
# with "Missing required plugin".
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open "$DEV"
P=$TARGET_PID

TP_A_DUMP_EXT_FILE=0 TP_B_INVENTORY=1 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" ||
	fail "dump failed"
grep -qx "plugin name=tp_a" "$T/img/inventory.host" || fail "claimer not in the inventory"
grep -qx "plugin name=tp_b" "$T/img/inventory.host" || fail "add_inventory_plugin() not in the inventory"
records | grep -qx "tp_b INIT(stage=0, imgdir=ok, inventory=added) = 0" || fail "add_inventory_plugin() not exported"
ok "inventory lists the claimer and the self-registered plugin"

: >"$REC"
host restore -D "$T/img" --plugin "$B" && fail "restore without tp_a succeeded"
log_has "Error: Missing required plugin: tp_a" || fail "no 'Missing required plugin' error"
cat >"$T/expected" <<EOT
tp_b INIT(stage=2, imgdir=ok) = 0
tp_b EXIT(stage=2, ret=-1)
EOT
expect_records "$T/expected"
ok "missing plugin: failure before RESTORE_INIT"

# Loaded is not enough: as in CRIU, a plugin must consume its entry with
# check_and_remove_inventory_plugin() in init(RESTORE).
: >"$REC"
TP_B_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" && fail "restore with tp_a not consuming its entry succeeded"
log_has "Error: Missing required plugin: tp_a" || fail "no 'Missing required plugin' for a loaded plugin"
ok "a loaded plugin that does not consume its inventory entry is missing"

: >"$REC"
TP_A_INVENTORY=1 TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" ||
	fail "restore with every plugin failed"
records | grep -qx "tp_b INIT(stage=2, imgdir=ok, inventory=listed) = 0" ||
	fail "check_and_remove_inventory_plugin() did not find tp_b"
ok "with every plugin loaded the restore succeeds; check_and_remove_inventory_plugin() works"

# A plugin the inventory does not name is told so.
: >"$REC"
rm -rf "$T/img2"
TP_A_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img2" --plugin "$A" || fail "dump failed"
TP_A_INVENTORY=1 TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_INVENTORY=1 host restore -D "$T/img2" --plugin "$A" --plugin "$B" ||
	fail "restore failed"
records | grep -qx "tp_b INIT(stage=2, imgdir=ok, inventory=absent) = 0" ||
	fail "check_and_remove_inventory_plugin() found an unlisted plugin"
ok "an unlisted plugin sees it is not needed"
done_testing
