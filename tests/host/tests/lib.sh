# SPDX-License-Identifier: GPL-2.0-only
# Helpers for criu-host's tests (sourced). CTest passes the binaries in
# CRIU_HOST, TEST_PLUGIN, HOST_TARGET, HOST_VERIFIER, AMDGPU_PLUGIN.
set -u

: "${CRIU_HOST:?}" "${TEST_PLUGIN:?}" "${HOST_TARGET:?}" "${HOST_VERIFIER:?}"

T=$(mktemp -d /tmp/criu-host-test.XXXXXX)
REC=$T/rec
export TESTPLUGIN_LOG=$REC
unset CRIU_LIBS_DIR
# Only the test that runs inside the emulator keeps it.
[ -n "${HOST_TEST_EMULATED:-}" ] || unset KFDEMU_SOCKET
TARGETS=()
declare -A HEARTBEAT
CHECKS=0

cleanup() {
	local p
	for p in "${TARGETS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	if [ -f "$T/log" ]; then
		echo "---- last criu-host log:" >&2
		tail -n 60 "$T/log" >&2
	fi
	if [ -f "$REC" ]; then
		echo "---- plugin records:" >&2
		cat "$REC" >&2
	fi
	exit 1
}

ok() {
	CHECKS=$((CHECKS + 1))
	echo "ok $CHECKS - $*"
}

# A copy of the test plugin under another name: a separate plugin.
plugin() {
	cp "$TEST_PLUGIN" "$T/$1.so"
	echo "$T/$1.so"
}

# A character device CRIU does not dump itself (not mem, tty or tun).
pick_device() {
	local d
	for d in /dev/fuse /dev/cpu_dma_latency /dev/hwrng /dev/autofs; do
		if [ -c "$d" ] && (exec 9<>"$d") 2>/dev/null; then
			echo "$d"
			return 0
		fi
	done
	echo "SKIP: no suitable character device" >&2
	exit 77
}

# start_target ARGS...: runs host_target, waits until it is set up and
# sets TARGET_PID, TARGET_CHILD, TARGET_MAP, TARGET_MAP_SIZE.
start_target() {
	local ready=$T/ready.$RANDOM hb=$T/heartbeat.$RANDOM
	"$HOST_TARGET" "$@" --ready "$ready" --heartbeat "$hb" &
	TARGETS+=($!)
	local i
	for i in $(seq 200); do
		[ -f "$ready" ] && break
		sleep 0.02
	done
	[ -f "$ready" ] || fail "host_target did not start"
	TARGET_PID=$(sed -n 's/.*pid=\([0-9]*\) .*/\1/p' "$ready")
	TARGET_CHILD=$(sed -n 's/.*child=\([0-9]*\) .*/\1/p' "$ready")
	TARGET_MAP=$(sed -n 's/.*map=\(0x[0-9a-f]*\) .*/\1/p' "$ready")
	TARGET_MAP_SIZE=$(sed -n 's/.*size=\([0-9]*\).*/\1/p' "$ready")
	[ "$TARGET_PID" = "$!" ] || fail "ready file names pid $TARGET_PID, started $!"
	HEARTBEAT[$TARGET_PID]=$hb
	if [ -n "$TARGET_CHILD" ] && [ "$TARGET_CHILD" != 0 ]; then
		TARGETS+=("$TARGET_CHILD")
	fi
}

# fake_vmas_kfd_emu DEV: $T/kfd-emu, a stand-in for the emulator's control
# command answering `ctl vmas PID` as its daemon does (devices.h): one
# mapping of DEV over the target's memfd map (TARGET_MAP, TARGET_MAP_SIZE
# of the last start_target), at device offset 4096; and criu-host pointed
# at it (CRIU_HOST_KFDEMU), with no daemon socket.
fake_vmas_kfd_emu() {
	local end
	end=$(printf '0x%x' $((TARGET_MAP + TARGET_MAP_SIZE)))
	cat >"$T/kfd-emu" <<EOT
#!/bin/bash
[ "\$1 \$2" = "ctl vmas" ] || exit 2
echo '{"pid":'\$3',"vmas":[{"start":$((TARGET_MAP)),"end":$((end)),"pgoff":4096,"prot":"rw-","path":"$1"}]}'
EOT
	chmod +x "$T/kfd-emu"
	export KFDEMU_SOCKET=$T/none CRIU_HOST_KFDEMU=$T/kfd-emu
}

# host ARGS...: runs criu-host at -v4 with its log in $T/log; returns its
# exit status.
host() {
	"$CRIU_HOST" "$@" -v4 -o "$T/log"
}

# The plugin records without the recording pid.
records() {
	sed -E 's/^([^ ]+) [0-9]+ /\1 /' "$REC"
}

# Records of one hook (plugin name, hook name and args).
records_of() {
	records | grep -F " $1(" || true
}

# The pid that made a record matching a pattern (first match).
record_pid() {
	grep -E "$1" "$REC" | head -n1 | awk '{print $2}'
}

# expect_records EXPECTED_FILE: the records equal the file's lines.
expect_records() {
	if ! diff -u "$1" <(records) >&2; then
		fail "plugin records differ from the expected ones"
	fi
}

# The task runs (not stopped, not traced) and its heartbeat advances.
expect_running() {
	local pid=$1 state tracer
	state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	tracer=$(awk '/^TracerPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	case "$state" in
	S | R | D) ;;
	*) fail "task $pid is in state '$state' after the dump" ;;
	esac
	[ "$tracer" = 0 ] || fail "task $pid is still traced by $tracer"
	local tid
	for tid in /proc/"$pid"/task/*; do
		tracer=$(awk '/^TracerPid:/ {print $2}' "$tid/status" 2>/dev/null)
		[ "${tracer:-0}" = 0 ] || fail "thread ${tid##*/} of $pid is still traced by $tracer"
	done
	local hb=${HEARTBEAT[$pid]:-}
	if [ -n "$hb" ]; then
		local a b i
		for i in $(seq 100); do
			[ -s "$hb" ] && break
			sleep 0.02
		done
		a=$(cat "$hb")
		for i in $(seq 100); do
			sleep 0.05
			b=$(cat "$hb")
			[ "$b" -gt "$a" ] && break
		done
		[ "$b" -gt "$a" ] || fail "task $pid does not run (heartbeat $a -> $b in 5 s)"
	fi
}

# The task is gone (or a zombie).
expect_dead() {
	local pid=$1 i state
	for i in $(seq 100); do
		state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		case "$state" in
		"" | Z | X) return 0 ;;
		esac
		sleep 0.02
	done
	fail "task $pid still alive (state $state)"
}

log_has() {
	grep -qF -- "$1" "$T/log"
}

done_testing() {
	echo "$CHECKS passed, 0 failed"
}
