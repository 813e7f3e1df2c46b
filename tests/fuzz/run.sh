#!/usr/bin/env bash
# Runs one libFuzzer target: its seed corpus first (every seed must pass),
# then SECONDS of fuzzing. New inputs go to WORK/fuzz-corpus/<target>/ (kept
# between runs), a crash to WORK/fuzz-artifacts/<target>-crash-*; a crash or
# a seed failing fails the test.
#   run.sh FUZZER SEEDS WORK SECONDS
set -u
fuzzer=$1 seeds=$2 work=$3 seconds=$4
name=$(basename "$fuzzer")
corpus=$work/fuzz-corpus/$name
mkdir -p "$corpus" "$work/fuzz-artifacts"
[ -d "$seeds" ] && [ -n "$(ls -A "$seeds")" ] || { echo "FAIL: no seeds in $seeds"; exit 1; }
opts=(-artifact_prefix="$work/fuzz-artifacts/$name-" -timeout=10 -rss_limit_mb=2048
      -print_final_stats=1)
# The seeds alone (each input run once): a known bug coming back fails here.
"$fuzzer" "${opts[@]}" -runs=0 "$seeds" 2>"$work/$name.seeds.log" ||
	{ tail -40 "$work/$name.seeds.log"; echo "FAIL: a seed of $seeds fails"; exit 1; }
echo "ok - $(ls "$seeds" | wc -l) seeds of $(basename "$seeds") pass"
"$fuzzer" "${opts[@]}" -max_total_time="$seconds" "$corpus" "$seeds" 2>"$work/$name.log"
rc=$?
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$work/$name.log" | tr '\n' ' '; echo
if [ $rc -ne 0 ]; then
	tail -60 "$work/$name.log"
	echo "FAIL: $name found a crash (input in $work/fuzz-artifacts/); fix it and add the input to $seeds"
	exit 1
fi
echo "ok - $name: ${seconds}s of fuzzing, no crash; corpus $(ls "$corpus" | wc -l) inputs"
echo "2 passed, 0 failed"
