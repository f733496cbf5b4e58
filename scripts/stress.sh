#!/usr/bin/env bash
# Runs the packages CI runs with the race detector N times while busy loops
# share the cores, and prints the failures per test. A test that passes
# alone but fails here depends on timing it does not wait for.
#
#   scripts/stress.sh                   # 5 runs, 4 busy loops, every race-tested package
#   STRESS_RUNS=3 scripts/stress.sh ./redlock/ ./fencing/
#   STRESS_RUN='^TestHandOff' scripts/stress.sh ./redlock/
#
# Arguments are root-module package patterns; without them every package
# `make test` runs with -race (the root module, then the chaos and bench
# modules; the model checker is a module of its own, run without -race). Environment: STRESS_RUNS (5), STRESS_BUSY
# (4 busy loops), STRESS_RUN (a -run pattern), STRESS_OUT (the folder the
# runs' JSON goes to; a new temporary one by default), GO (go).
# The exit status is 0 only when every run passed.
set -euo pipefail

cd "$(dirname "$0")/.."

runs="${STRESS_RUNS:-5}"
busy="${STRESS_BUSY:-4}"
go="${GO:-go}"
out="${STRESS_OUT:-$(mktemp -d -t quorumlock-stress.XXXXXX)}"
mkdir -p "$out"
case "$runs" in '' | *[!0-9]*) echo "STRESS_RUNS must be a number, not '$runs'" >&2; exit 2 ;; esac
case "$busy" in '' | *[!0-9]*) echo "STRESS_BUSY must be a number, not '$busy'" >&2; exit 2 ;; esac

# Each target is "module-dir package-patterns...".
targets=()
if [ "$#" -gt 0 ]; then
	# The model checker (a module of its own, CPU-bound for minutes, run
	# without -race by make test) is never part of a stress run.
	targets+=(". $("$go" list "$@" | tr '\n' ' ')")
else
	targets+=(". $("$go" list ./... | tr '\n' ' ')")
	targets+=("chaos ./...")
	targets+=("bench ./...")
fi
runflag=()
if [ -n "${STRESS_RUN:-}" ]; then
	runflag=(-run "$STRESS_RUN")
fi

pids=()
gotest=
stop_busy() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	pids=()
}
stop_all() {
	stop_busy
	if [ -n "$gotest" ]; then
		# go test does not pass a signal on to the test binaries it runs:
		# interrupt them (they clean up their servers), then go test.
		pkill -INT -P "$gotest" 2>/dev/null || true
		kill -INT "$gotest" 2>/dev/null || true
		wait "$gotest" 2>/dev/null || true
	fi
	exit 130
}
trap stop_busy EXIT
trap stop_all INT TERM

# Compile first, so the runs time tests and not the compiler.
for t in "${targets[@]}"; do
	read -r dir pkgs <<<"$t"
	# shellcheck disable=SC2086
	"$go" -C "$dir" test -race -count=1 -run '^$' $pkgs >/dev/null
done

for _ in $(seq "$busy"); do
	(while :; do :; done) &
	pids+=("$!")
done
echo "--- $runs runs with $busy busy loops on $(nproc) cores; JSON in $out"

failed_runs=0
for r in $(seq "$runs"); do
	start=$SECONDS
	status=0
	for t in "${targets[@]}"; do
		read -r dir pkgs <<<"$t"
		name="$(echo "$dir" | tr '/.' '__')"
		# In the background, so that an interrupt can stop it (see trap).
		# shellcheck disable=SC2086
		"$go" -C "$dir" test -race -count=1 -timeout "${TEST_TIMEOUT:-20m}" -json "${runflag[@]}" $pkgs \
			>"$out/run$r-$name.json" 2>"$out/run$r-$name.stderr" &
		gotest=$!
		wait "$gotest" || status=1
		gotest=
	done
	[ "$status" -eq 0 ] || failed_runs=$((failed_runs + 1))
	n="$(cat "$out"/run"$r"-*.json | grep -c '"Action":"fail"' || true)"
	echo "run $r: $([ "$status" -eq 0 ] && echo pass || echo FAIL) in $((SECONDS - start)) s, $n failed events (load $(cut -d' ' -f1 /proc/loadavg))"
done
stop_busy

# A failed test is a "fail" event with a Test field; a "fail" without one
# is its package (a panic or timeout shows there too).
echo "--- failures per test over $runs runs"
cat "$out"/run*.json | grep '"Action":"fail"' |
	sed -E 's/.*"Package":"([^"]*)"(,"Test":"([^"]*)")?.*/\1 \3/' |
	sort | uniq -c | sort -rn | awk '{ printf "%4d  %s %s\n", $1, $2, ($3 == "" ? "(package)" : $3) }' || true
echo "--- $failed_runs of $runs runs failed"
[ "$failed_runs" -eq 0 ]
