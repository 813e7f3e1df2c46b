# The log: plugin lines verbatim behind the level tag, filtered by -v;
# LOG_MSG always printed; stderr by default.
source "$(dirname "$0")/lib.sh"

A=$(plugin tp_a)
B=$(plugin tp_b)
start_target --open /dev/null
P=$TARGET_PID

dump_at() {
	rm -rf "$T/img"
	"$CRIU_HOST" dump -t "$P" -D "$T/img" --plugin "$A" --plugin "$B" "$@"
}

TP_A_SAY="1:tp_a says boom" TP_B_SAY="2:tp_b warns" dump_at -v4 -o "$T/log" || fail "dump failed"
grep -qE '^\([0-9]{2}\.[0-9]{6}\) Error: tp_a says boom$' "$T/log" || fail "error line format"
grep -qE '^\([0-9]{2}\.[0-9]{6}\) Warn: tp_b warns$' "$T/log" || fail "warning line format"
grep -qE '^\([0-9]{2}\.[0-9]{6}\) tp_a: init stage 0$' "$T/log" || fail "info line format"
grep -qE '^\([0-9]{2}\.[0-9]{6}\) plugin tp_a: PAUSE_DEVICES\(pid='"$P"'\) = -95$' "$T/log" || fail "hook line format"
ok "-v4: tagged error/warning lines, plugin text verbatim, hook calls"

TP_A_SAY="1:tp_a says boom" TP_B_SAY="2:tp_b warns" dump_at -v1 -o "$T/log" || fail "dump failed"
grep -q "tp_a says boom" "$T/log" || fail "error filtered at -v1"
! grep -q "tp_b warns" "$T/log" || fail "warning shown at -v1"
! grep -q "init stage" "$T/log" || fail "info shown at -v1"
ok "-v1 keeps errors only"

TP_A_SAY="2:tp_a warns" dump_at 2>"$T/stderr" || fail "dump failed"
grep -q "Warn: tp_a warns" "$T/stderr" || fail "default level or destination"
! grep -q "init stage" "$T/stderr" || fail "info shown by default"
ok "default: warnings and errors on stderr"

TP_A_SAY="-1:always shown" dump_at -v1 -o "$T/log" || fail "dump failed"
grep -qx "always shown" "$T/log" || fail "LOG_MSG line"
ok "LOG_MSG printed at any level, without prefix"

"$CRIU_HOST" >/dev/null 2>&1
[ $? = 2 ] || fail "no arguments: exit status not 2"
"$CRIU_HOST" dump -D "$T/img" >/dev/null 2>&1
[ $? = 2 ] || fail "dump without -t: exit status not 2"
ok "bad command lines exit 2"
done_testing
