# Plugin loading as CRIU does it: version > 512 or max_hooks > 15 is a
# "Corrupted plugin"; no CR_PLUGIN_DESC or no file fails the run; a plugin
# with fewer hook slots is called only for those.
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open /dev/null
P=$TARGET_PID

try() {
	: >"$REC"
	rm -rf "$T/img"
	host dump -t "$P" -D "$T/img" "$@"
}

TP_B_VERSION=513 try --plugin "$A" --plugin "$B" && fail "version 513 accepted"
log_has "Plugin tp_b has version 201 while max 200 supported" || fail "no version message"
log_has "Error: Corrupted plugin $B" || fail "no 'Corrupted plugin' error"
[ -z "$(records_of INIT | grep tp_b)" ] || fail "init of a rejected plugin"
records | grep -qx "tp_a EXIT(stage=0, ret=-1)" || fail "loaded plugin not told the run failed"
[ -z "$(records_of PAUSE_DEVICES)" ] || fail "dump went on"
ok "version above 0.2.0 rejected"

TP_B_MAX_HOOKS=16 try --plugin "$A" --plugin "$B" && fail "max_hooks 16 accepted"
log_has "Plugin tp_b has 16 assigned while max 15 supported" || fail "no max_hooks message"
log_has "Error: Corrupted plugin $B" || fail "no 'Corrupted plugin' error"
ok "max_hooks above 15 rejected"

TP_A_MAX_HOOKS=13 TP_B_MAX_HOOKS=15 try --hooks 13 --plugin "$A" --plugin "$B" && fail "max_hooks 15 accepted by a 13-hook CRIU"
log_has "Plugin tp_b has 15 assigned while max 13 supported" || fail "no max_hooks message (13 hooks)"
log_has "Error: Corrupted plugin $B" || fail "no 'Corrupted plugin' error (13 hooks)"
ok "CRIU 4.2's ABI (--hooks 13) rejects a plugin declaring 15 hooks"

TP_B_VERSION=0x100 TP_B_MAX_HOOKS=10 try --plugin "$A" --plugin "$B" || fail "older plugin rejected"
[ "$(records_of PAUSE_DEVICES | cut -d' ' -f1)" = tp_a ] || fail "hook 10 called on a plugin with 10 slots"
[ -n "$(records_of DUMP_DEVICES_LATE | grep tp_a)" ] && [ -z "$(records_of DUMP_DEVICES_LATE | grep tp_b)" ] ||
	fail "hook 14 called on a plugin with 10 slots"
ok "an older plugin (version 0.1.0, 10 hooks) loads and gets only its hooks"

try --plugin "$HOST_VERIFIER" && fail "a library without CR_PLUGIN_DESC loaded"
log_has "Can't load plugin $HOST_VERIFIER" || fail "no error for a library without descriptor"
ok "no CR_PLUGIN_DESC: error"

try --plugin "$T/nonexistent.so" && fail "a missing plugin file loaded"
log_has "Error: Unable to load $T/nonexistent.so" || fail "no dlopen error"
ok "dlopen failure: error"

try --libdir "$T/nonexistent" && fail "a missing libdir accepted"
ok "missing --libdir: error"

expect_running "$P"
done_testing
