# Device mappings under the emulated GPU: the host asks the emulator's
# control command for the task's device mappings (a stand-in script here),
# calls HANDLE_DEVICE_VMA with the mapping's fd and the device's stat, and at
# restore UPDATE_VMA_MAP + the mmap at the same address in the task.
source "$(dirname "$0")/lib.sh"

DEV=$(pick_device)
A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --memfd-map 8192 --open "$DEV" --child
P=$TARGET_PID C=$TARGET_CHILD MAP=$TARGET_MAP
END=$(printf '0x%x' $((MAP + TARGET_MAP_SIZE)))

# The emulator's control command, answering as its daemon does (devices.h).
fake_vmas_kfd_emu "$DEV"
RDEV="$((0x$(stat -c %t "$DEV"))):$((0x$(stat -c %T "$DEV")))"

# Nobody handles the mapping: CRIU's error.
TP_A_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" && fail "unclaimed device mapping dumped"
log_has "Error: handle_device_vma plugin failed" || fail "no handle_device_vma error"
log_has "Error: Can't handle non-regular mapping on $P's map ${MAP#0x}" || fail "no non-regular mapping error"
[ "$(records_of HANDLE_DEVICE_VMA | cut -d' ' -f1 | tr '\n' ' ')" = "tp_a tp_b " ] || fail "not every plugin asked"
[ -z "$(records_of DUMP_EXT_FILE)" ] || fail "files dumped after the mapping failed"
expect_running "$P"
ok "-ENOTSUP from every plugin fails the dump; task runs"

: >"$REC"
TP_A_DUMP_EXT_FILE=0 TP_B_HANDLE_DEVICE_VMA=0 host dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" --kill ||
	fail "dump failed"
wait "$P" 2>/dev/null
records_of HANDLE_DEVICE_VMA | grep -q "^tp_b HANDLE_DEVICE_VMA(fd=[0-9]*, rdev=$RDEV, chr=1, path=/memfd:host-target (deleted)) = 0\$" ||
	fail "HANDLE_DEVICE_VMA did not get the mapping's fd and the device's stat"
[ "$(records_of HANDLE_DEVICE_VMA | grep -c '^tp_b')" = 2 ] || fail "not called for both tasks"
# Per task: mappings before files.
records | grep -E "HANDLE_DEVICE_VMA|DUMP_EXT_FILE" | cut -d'(' -f1 | uniq >"$T/seq"
printf '%s\n' "tp_a HANDLE_DEVICE_VMA" "tp_b HANDLE_DEVICE_VMA" "tp_a DUMP_EXT_FILE" \
	"tp_a HANDLE_DEVICE_VMA" "tp_b HANDLE_DEVICE_VMA" >"$T/seq.expected"
diff -u "$T/seq.expected" "$T/seq" >&2 || fail "mapping/file order"
grep -qx "plugin name=tp_b" "$T/img/inventory.host" || fail "mapping claimer not in the inventory"
grep -qx "vma task=$P start=$MAP end=$END prot=3 flags=0x1 pgoff=0x1000 path=$DEV" "$T/img/inventory.host" ||
	fail "mapping not recorded"
ok "HANDLE_DEVICE_VMA per mapping, before the task's files; recorded"

# The other accepted answer shape (a bare list, numbers as strings), and an
# error answer.
cat >"$T/kfd-emu-list" <<EOT
#!/bin/bash
echo '[{"start": "$MAP", "end": "$END", "pgoff": "0x2000", "prot": 1, "flags": "private", "path": "$DEV"}]'
EOT
printf '#!/bin/bash\necho %s\n' "'{\"error\":\"no such process\"}'" >"$T/kfd-emu-error"
chmod +x "$T/kfd-emu-list" "$T/kfd-emu-error"
start_target --memfd-map 8192
TP_B_HANDLE_DEVICE_VMA=0 CRIU_HOST_KFDEMU=$T/kfd-emu-list host dump -t "$TARGET_PID" -D "$T/img-list" --plugin "$A" --plugin "$B" ||
	fail "dump with a bare-list answer failed"
grep -qx "vma task=$TARGET_PID start=$MAP end=$END prot=1 flags=0x2 pgoff=0x2000 path=$DEV" "$T/img-list/inventory.host" ||
	fail "bare-list answer misread"
CRIU_HOST_KFDEMU=$T/kfd-emu-error host dump -t "$TARGET_PID" -D "$T/img-err" --plugin "$A" && fail "error answer ignored"
log_has "no such process" || fail "the emulator's error not reported"
CRIU_HOST_KFDEMU=$T/none host dump -t "$TARGET_PID" -D "$T/img-err" --plugin "$A" && fail "missing kfd-emu ignored"
expect_running "$TARGET_PID"
ok "answer shapes: bare list with string numbers; error object and missing command fail the dump"

# Restore: the plugin supplies the fd to map (a /dev/zero stands in).
: >"$REC"
TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_UPDATE_VMA_MAP=open:/dev/zero \
	TP_A_INVENTORY=1 TP_B_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" --verifier "$HOST_VERIFIER:verify_mapped" --verifier-arg "$MAP" ||
	fail "restore failed"
[ "$(records_of UPDATE_VMA_MAP | grep -c "^tp_b UPDATE_VMA_MAP(path=$DEV, addr=$MAP, old_pgoff=0x1000) = 1\$")" = 2 ] ||
	fail "UPDATE_VMA_MAP args"
[ "$(grep -c 'verify_mapped() = 0 (pass)' "$T/log")" = 2 ] || fail "mapping not in place in the restored tasks"
log_has "New mmap $MAP-$END:0x1000->0 fd" || fail "new pgoff not used"
ok "UPDATE_VMA_MAP in each task; the mapping is at its address, from the plugin's fd and new pgoff"

# A plugin's own mapping must not take a dumped mapping's place: the host
# holds the tasks' ranges before it loads plugins (address_hold.h), so a
# buffer hinted right at the dumped address lands elsewhere and the task
# still maps at its address.
: >"$REC"
TP_A_MAP_NEAR="$MAP:$TARGET_MAP_SIZE" TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_UPDATE_VMA_MAP=open:/dev/zero \
	TP_A_INVENTORY=1 TP_B_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" --verifier "$HOST_VERIFIER:verify_mapped" --verifier-arg "$MAP" ||
	fail "restore failed with a plugin mapping hinted at the dumped address"
NEAR=$(records_of MAP_NEAR | sed -E 's/.* = //')
[ -n "$NEAR" ] && [ "$NEAR" != "(nil)" ] && [ "$NEAR" != "0xffffffffffffffff" ] || fail "the plugin's mapping failed: $NEAR"
[ "$((NEAR))" != "$((MAP))" ] || fail "the plugin's mapping got the dumped address $MAP"
[ "$(grep -c 'verify_mapped() = 0 (pass)' "$T/log")" = 2 ] || fail "mapping not in place with a plugin mapping near it"
ok "a plugin's mapping hinted at a dumped address lands elsewhere; the tasks map at theirs"

# A dumped range the host's own startup mappings cover in every layout (all
# of user space): it starts again a few times, then says why it gives up,
# before any plugin is loaded.
mkdir -p "$T/img-wide"
cp -a "$T/img/." "$T/img-wide/"
sed -i -E "s/^(vma task=[0-9]+) start=[^ ]+ end=[^ ]+ /\1 start=0x10000 end=0x7ffffffff000 /" "$T/img-wide/inventory.host"
: >"$REC"
TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_UPDATE_VMA_MAP=open:/dev/zero TP_A_INVENTORY=1 TP_B_INVENTORY=1 \
	host restore -D "$T/img-wide" --plugin "$A" --plugin "$B" && fail "restore over the host's own mappings succeeded"
[ "$(grep -c 'starting again for another address layout' "$T/log")" = 7 ] || fail "not started again 7 times"
log_has "Error: after 8 address layouts: can't hold 0x10000-0x7ffffffff000 for the tasks' mappings: File exists" ||
	fail "no error naming the range"
[ -z "$(records_of INIT)" ] || fail "plugins loaded before the ranges were held"
ok "a range the host itself maps: 8 layouts tried, then a clear error, no plugin loaded"

# The verifier really checks the address.
: >"$REC"
TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_UPDATE_VMA_MAP=open:/dev/zero \
	TP_A_INVENTORY=1 TP_B_INVENTORY=1 host restore -D "$T/img" --plugin "$A" --plugin "$B" --verifier "$HOST_VERIFIER:verify_mapped" --verifier-arg 0x1000 &&
	fail "verify_mapped passed for an unmapped address"
ok "verify_mapped can fail"

: >"$REC"
TP_A_INVENTORY=1 TP_B_INVENTORY=1 TP_A_RESTORE_EXT_FILE=open:/dev/null TP_B_UPDATE_VMA_MAP=-5 host restore -D "$T/img" --plugin "$A" --plugin "$B" &&
	fail "restore with a failing UPDATE_VMA_MAP succeeded"
log_has "UPDATE_VMA_MAP failed for $MAP: -5" || fail "no error"
ok "UPDATE_VMA_MAP error fails the restore"
# Consecutive mappings of one device: CRIU asks the plugins about the first
# only (the next borrows its file); another device after it is asked again.
start_target --memfd-map 16384 --split
S=$TARGET_MAP
M=$(printf '0x%x' $((S + 8192)))
E=$(printf '0x%x' $((S + 16384)))
grep -q "^${S#0x}-${M#0x} " /proc/$TARGET_PID/maps && grep -q "^${M#0x}-${E#0x} " /proc/$TARGET_PID/maps ||
	fail "target mapping not split in two"
emu_two() {
	cat >"$T/kfd-emu-two" <<EOT
#!/bin/bash
echo '{"vmas":[{"start":$((S)),"end":$((M)),"pgoff":0,"prot":"rw-","path":"$1"},{"start":$((M)),"end":$((E)),"pgoff":8192,"prot":"r--","path":"$2"}]}'
EOT
	chmod +x "$T/kfd-emu-two"
}
emu_two "$DEV" "$DEV"
: >"$REC"
TP_A_HANDLE_DEVICE_VMA=0 CRIU_HOST_KFDEMU=$T/kfd-emu-two host dump -t "$TARGET_PID" -D "$T/img-two" --plugin "$A" ||
	fail "dump failed"
[ "$(records_of HANDLE_DEVICE_VMA | wc -l)" = 1 ] || fail "HANDLE_DEVICE_VMA called for a borrowing mapping"
[ "$(grep -c "^vma task=$TARGET_PID " "$T/img-two/inventory.host")" = 2 ] || fail "borrowing mapping not recorded"
ok "a mapping right after one of the same device borrows its result"
emu_two "$DEV" /dev/null
: >"$REC"
TP_A_HANDLE_DEVICE_VMA=0 CRIU_HOST_KFDEMU=$T/kfd-emu-two host dump -t "$TARGET_PID" -D "$T/img-two2" --plugin "$A" ||
	fail "dump failed"
[ "$(records_of HANDLE_DEVICE_VMA | wc -l)" = 2 ] || fail "HANDLE_DEVICE_VMA not called for another device"
ok "a different device after it is asked again"
done_testing
