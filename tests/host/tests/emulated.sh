# The host inside the emulated GPU (kfd-emu): the shim makes the emulated
# /dev/kfd and render-node fds look like the devices to the host's fstat()
# and readlink(), so they go to DUMP_EXT_FILE; the host finds the build's
# kfd-emu for the mapping query; plugin-opened devices land on the right
# fds in the restored tasks.
if [ -z "${KFDEMU_SOCKET:-}" ]; then
	[ -x "${KFD_EMU:-}" ] || { echo "SKIP: kfd-emu not built"; exit 77; }
	HOST_TEST_EMULATED=1 exec timeout -s KILL 120 "$KFD_EMU" --machine MI100 -- bash "$0"
fi
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
start_target --open /dev/kfd --open /dev/dri/renderD128 --child
P=$TARGET_PID C=$TARGET_CHILD

TP_A_DUMP_EXT_FILE=0 host dump -t "$P" -D "$T/img" --plugin "$A" --kill || fail "dump failed"
wait "$P" 2>/dev/null
INV=$T/img/inventory.host
grep -q "^fd task=$P fd=3 id=[0-9]* kind=ext .* path=/dev/kfd$" "$INV" || fail "/dev/kfd not a plugin file"
grep -q "^fd task=$P fd=4 id=[0-9]* kind=ext .* path=/dev/dri/renderD128$" "$INV" || fail "render node not a plugin file"
log_has "(chr 510:0)" || log_has "fdinfo 3: pos: 0 flags: 100002 id 1 (chr" || fail "kfd fd not seen as a character device"
[ "$(records_of DUMP_EXT_FILE | grep -c 'path=/dev/kfd)')" = 1 ] || fail "DUMP_EXT_FILE of /dev/kfd"
[ "$(records_of DUMP_EXT_FILE | grep -c 'path=/dev/dri/renderD128)')" = 1 ] || fail "DUMP_EXT_FILE of the render node"
! log_has "Can't collect device mappings" || fail "kfd-emu ctl vmas failed"
ok "emulated device fds dumped by the plugin; mapping query answered"

: >"$REC"
ID_KFD=$(sed -n "s/^fd task=$P fd=3 id=\([0-9]*\) .*/\1/p" "$INV")
TP_A_INVENTORY=1 TP_A_RESTORE_EXT_FILE=open:/dev/kfd host restore -D "$T/img" --plugin "$A" \
	--verifier "$HOST_VERIFIER:verify_fds" --verifier-arg "3=/dev/kfd,4=/dev/kfd" || fail "restore failed"
[ "$(grep -c 'verify_fds() = 0 (pass)' "$T/log")" = 2 ] || fail "restored fds are not the emulated device"
ok "plugin-opened emulated devices restored onto their fds in both tasks"
done_testing
