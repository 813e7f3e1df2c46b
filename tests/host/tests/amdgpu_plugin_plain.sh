# Acceptance: the real amdgpu_plugin.so, loaded beside another plugin on a
# machine without a GPU, lets a process that uses no GPU be dumped and
# restored, with no error or warning line of its own, and the plugin after
# it still gets the dump hooks (DUMP_DEVICES_LATE included).
source "$(dirname "$0")/lib.sh"

: "${AMDGPU_PLUGIN:?}"
[ -f "$AMDGPU_PLUGIN" ] || fail "amdgpu_plugin.so not built: $AMDGPU_PLUGIN"
A=$(plugin tp_a)
start_target --open /dev/null --child
P=$TARGET_PID C=$TARGET_CHILD

check_log() {
	if grep -E "(Error|Warn): .*amdgpu_plugin" "$T/log" >&2; then
		fail "$1: amdgpu_plugin logged an error or a warning"
	fi
	if grep -E "^\([0-9.]+\) ( *[0-9]+: )?(Error|Warn): " "$T/log" >&2; then
		fail "$1: error or warning lines"
	fi
}

host dump -t "$P" -D "$T/img" --plugin "$AMDGPU_PLUGIN" --plugin "$A" --kill || fail "dump failed"
wait "$P" 2>/dev/null
check_log dump
log_has "plugin amdgpu_plugin: init(DUMP) = 0" || fail "amdgpu_plugin not loaded"
records | grep -qx "tp_a DUMP_DEVICES_LATE(pid=$P, traced=1, watched_fds=-1) = -95" ||
	fail "the plugin after amdgpu_plugin did not get DUMP_DEVICES_LATE"
[ "$(records_of PAUSE_DEVICES | wc -l)" = 2 ] && [ "$(records_of CHECKPOINT_DEVICES | wc -l)" = 2 ] ||
	fail "the plugin after amdgpu_plugin missed PAUSE/CHECKPOINT_DEVICES"
! grep -q "plugin name=amdgpu_plugin" "$T/img/inventory.host" || fail "amdgpu_plugin required by a GPU-less dump"
ok "dump: success, no error or warning, the next plugin gets every dump hook"

: >"$REC"
host restore -D "$T/img" --plugin "$AMDGPU_PLUGIN" --plugin "$A" --verifier "$HOST_VERIFIER:verify_fds" \
	--verifier-arg "3=/dev/null" || fail "restore failed"
check_log restore
log_has "plugin amdgpu_plugin: init(RESTORE) = 0" || fail "amdgpu_plugin not loaded"
[ "$(grep -c 'verify_fds() = 0 (pass)' "$T/log")" = 2 ] || fail "restored tasks not verified"
records | grep -qx "tp_a EXIT(stage=2, ret=0)" || fail "no exit(RESTORE, 0)"
ok "restore: success, no error or warning"

# Without the test plugin, and from a --libdir as CRIU would load it.
mkdir "$T/libs"
cp "$AMDGPU_PLUGIN" "$T/libs/"
start_target --open /dev/null
host dump -t "$TARGET_PID" -D "$T/img2" --libdir "$T/libs" || fail "dump from --libdir failed"
check_log "libdir dump"
host restore -D "$T/img2" --libdir "$T/libs" --verifier "$HOST_VERIFIER:verify_pass" || fail "restore from --libdir failed"
check_log "libdir restore"
ok "amdgpu_plugin alone from --libdir: dump and restore succeed quietly"

# The released CRIU ABIs (4.0/4.1: 12 hooks, 4.2-4.2.1: 13): the plugin
# declares the loader's count, so it is never a "Corrupted plugin", and the
# plugin after it gets every hook that ABI has.
for n in 12 13; do
	: >"$REC"
	start_target --open /dev/null
	TP_A_MAX_HOOKS=$n host dump --hooks "$n" -t "$TARGET_PID" -D "$T/img$n" --plugin "$AMDGPU_PLUGIN" --plugin "$A" ||
		fail "$n hooks: dump failed"
	check_log "$n hooks: dump"
	log_has "Plugin \"amdgpu_plugin\" (version 512 hooks $n)" || fail "$n hooks: declared count not $n"
	[ "$(records_of PAUSE_DEVICES | wc -l)" = 1 ] && [ "$(records_of CHECKPOINT_DEVICES | wc -l)" = 1 ] ||
		fail "$n hooks: the plugin after amdgpu_plugin missed PAUSE/CHECKPOINT_DEVICES"
	[ -z "$(records_of DUMP_DEVICES_LATE)" ] || fail "$n hooks: a hook the ABI lacks was called"
	TP_A_MAX_HOOKS=$n host restore --hooks "$n" -D "$T/img$n" --plugin "$AMDGPU_PLUGIN" --plugin "$A" \
		--verifier "$HOST_VERIFIER:verify_pass" || fail "$n hooks: restore failed"
	check_log "$n hooks: restore"
	records | grep -q "^tp_a RESUME_DEVICES_LATE(" || fail "$n hooks: tp_a missed RESUME_DEVICES_LATE"
	if [ "$n" = 13 ]; then
		records | grep -q "^tp_a POST_FORKING(" || fail "13 hooks: tp_a missed POST_FORKING"
	fi
	ok "$n-hook ABI (CRIU $([ "$n" = 12 ] && echo 4.0/4.1 || echo 4.2)): loads, dumps and restores quietly"
done
done_testing
