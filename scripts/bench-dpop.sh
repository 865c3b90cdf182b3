#!/usr/bin/env bash
# make bench-dpop (run by make bench): what a device-bound (DPoP) session's
# request costs against a Bearer one, and the cookie path beside them, in
# one run: BenchmarkTokenRequestParallel (the requests sent 8 per core at a
# time, as a loaded instance receives them) and BenchmarkTokenRequest (one at a
# time), both in internal/edge/dpop_bench_test.go, ROUNDS times, the
# request kinds interleaved round by round, N requests each; the medians
# and their ratios to Bearer's of the same run go to OUT with the raw
# lines, then CPU profiles of the Bearer and the DPoP requests (of the
# requests alone) and what the DPoP request's extra CPU is spent on. The
# goal (a DPoP request's CPU at most GOAL times a Bearer one's, sent in
# parallel) and its result go to OUT and, as the "DPoP-bound request" row
# of the Goals table and its paragraph, to MD (BENCHMARKS.md; make bench
# writes that file first, then runs this; MD= leaves it alone). Needs a
# Redis (make bench runs it under scripts/with-redis.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TAGS=${TAGS:-integration}
ROUNDS=${ROUNDS:-5}
N=${N:-10000} # a DPoP run signs its N proofs first: they must all be used within their 60 s
PROF_N=${PROF_N:-20000} # more samples for the profiles (a sample is 10 ms: 0.5 µs per request)
OUT=${OUT:-bench/dpop.txt}
MD=${MD-BENCHMARKS.md}
GOAL=${GOAL:-2.00}
# BenchmarkTokenRequestParallel's requests in flight: tokenRequestParallelism
# (8) per P, GOMAXPROCS being the cores.
inflight=$((8 * $(nproc)))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
raw=$work/raw
mkdir "$work/prof"
# One test binary for every run: the rounds measure the same build, and no
# compile or link runs between them.
"$GO" test -c -tags "$TAGS" -o "$work/edge.test" ./internal/edge/
bench() { (cd internal/edge && "$work/edge.test" -test.run='^$' "$@"); }
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r of $ROUNDS" >&2
  bench -test.bench='^BenchmarkTokenRequest(Parallel)?$' -test.benchtime="${N}x" >>"$raw"
done
echo "== CPU profiles of the Bearer and the DPoP requests" >&2
bench -test.bench='^BenchmarkTokenRequest(Parallel)?$/^(Bearer|DPoP)$' -test.benchtime="${PROF_N}x" \
  -tokenrequest.cpuprofile="$work/prof" >"$work/profraw"
load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)
grep '^cpu:' "$raw" | head -1 >&2 || true

# table MODE: the medians of BenchmarkTokenRequestMODE's rounds, with their
# ratios to Bearer's, and the figures the goal uses as shell assignments.
table() {
  awk -v bench="BenchmarkTokenRequest$1" '
    index($1, bench "/") == 1 {
      k = substr($1, length(bench) + 2); sub(/-[0-9]+$/, "", k)
      if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      for (i = 3; i < NF; i += 2) { v[k, $(i+1), ++cnt[k, $(i+1)]] = $i }
    }
    function median(k, u,    n, i, j, a, t) {
      n = cnt[k, u]; if (n == 0) return -1
      for (i = 1; i <= n; i++) a[i] = v[k, u, i] + 0
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
      return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    function ratio(k, u) { return median("Bearer", u) > 0 ? sprintf("%.2f×", median(k, u) / median("Bearer", u)) : "n/a" }
    END {
      print "| Request | ns/op | CPU ns/op | ctxsw/op | allocs/op | B/op | Redis cmds/op | ns ×Bearer | CPU ×Bearer | allocs ×Bearer | Redis cmds − Bearer |"
      print "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
      for (i = 1; i <= nk; i++) {
        k = order[i]
        printf "| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.3f | %s | %s | %s | %+.3f |\n", k, median(k, "ns/op"), median(k, "cpu-ns/op"),
          median(k, "ctxsw/op"), median(k, "allocs/op"), median(k, "B/op"), median(k, "redis-cmds/op"), ratio(k, "ns/op"),
          ratio(k, "cpu-ns/op"), ratio(k, "allocs/op"), median(k, "redis-cmds/op") - median("Bearer", "redis-cmds/op")
      }
      # Each round ran both kinds in one process: the range of their ratios.
      lo = 1e9; hi = 0
      for (i = 1; i <= cnt["DPoP", "cpu-ns/op"]; i++) {
        r = v["DPoP", "cpu-ns/op", i] / v["Bearer", "cpu-ns/op", i]
        if (r < lo) lo = r
        if (r > hi) hi = r
      }
      printf "#vars dpop_cpu=%.0f bearer_cpu=%.0f dpop_allocs=%.0f bearer_allocs=%.0f redis_more=%.3f dpop_ctxsw=%.2f bearer_ctxsw=%.2f round_lo=%.2f round_hi=%.2f\n",
        median("DPoP", "cpu-ns/op"), median("Bearer", "cpu-ns/op"), median("DPoP", "allocs/op"), median("Bearer", "allocs/op"),
        median("DPoP", "redis-cmds/op") - median("Bearer", "redis-cmds/op"), median("DPoP", "ctxsw/op"), median("Bearer", "ctxsw/op"), lo, hi
    }' "$raw"
}
# vars PREFIX MODE: table MODE's figures as PREFIX_name=value.
vars() { table "$2" | sed -n 's/^#vars //p' | tr ' ' '\n' | sed "s/^/$1_/"; }
eval "$(vars par Parallel)"
eval "$(vars one '')"
us() { awk -v ns="$1" 'BEGIN { printf "%.0f", ns / 1000 }'; }
ratio_of() { awk -v d="$1" -v b="$2" 'BEGIN { printf "%.2f", d / b }'; }
cpu_ratio=$(ratio_of "$par_dpop_cpu" "$par_bearer_cpu")
one_ratio=$(ratio_of "$one_dpop_cpu" "$one_bearer_cpu")
result=$(awk -v r="$cpu_ratio" -v g="$GOAL" 'BEGIN { print (r <= g + 0) ? "PASS" : "FAIL" }')
dpop_us=$(us "$par_dpop_cpu")
bearer_us=$(us "$par_bearer_cpu")
goal_us=$(awk -v b="$par_bearer_cpu" -v g="$GOAL" 'BEGIN { printf "%.0f", b * g / 1000 }')

# The profiles: per request (PROF_N), the CPU of each part of the process,
# from the cumulative time of the function that does it; part FILE NAME.
for p in "$work"/prof/*.prof; do
  "$GO" tool pprof -top -cum -unit=ms -nodecount=100000 -nodefraction=0 -edgefraction=0 "$work/edge.test" "$p" 2>/dev/null >"${p%.prof}.top"
done
part() {
  awk -v name="$2" -v n="$PROF_N" '
    /Total samples/ && name == "total" { v = $0; sub(/.*Total samples = /, "", v); sub(/ms.*/, "", v); printf "%.1f", v * 1000 / n; found = 1; exit }
    $NF == name { v = $4; sub(/ms$/, "", v); printf "%.1f", v * 1000 / n; found = 1; exit }
    END { if (!found) printf "0" }' "$work/prof/$1.top"
}
declare -A P
for run in BenchmarkTokenRequest_Bearer BenchmarkTokenRequest_DPoP BenchmarkTokenRequestParallel_Bearer BenchmarkTokenRequestParallel_DPoP; do
  P[$run:total]=$(part "$run" total)
  P[$run:rusage]=$(awk -v b="${run/_//}" '$1 ~ "^" b "-[0-9]+$" || $1 == b { for (i = 3; i < NF; i++) if ($(i+1) == "cpu-ns/op") printf "%.1f", $i / 1000 }' "$work/profraw")
  P[$run:serve]=$(part "$run" 'github.com/labstack/echo/v4.(*Echo).ServeHTTP')
  P[$run:verify]=$(part "$run" 'github.com/fintech-bff/bff/internal/dpop.(*Verifier).Verify')
  P[$run:ecdsa]=$(part "$run" 'crypto/ecdsa.VerifyASN1')
  P[$run:claim]=$(part "$run" 'github.com/fintech-bff/bff/internal/kv.(*Claims).SetNX')
  P[$run:sched]=$(part "$run" 'runtime.mcall')
  P[$run:upstream]=$(part "$run" 'net/http.(*conn).serve')
  P[$run:client]=$(awk -v a="$(part "$run" 'net/http.(*persistConn).readLoop')" -v b="$(part "$run" 'net/http.(*persistConn).writeLoop')" 'BEGIN { printf "%.1f", a + b }')
  P[$run:gc]=$(awk -v a="$(part "$run" 'runtime.gcBgMarkWorker')" -v b="$(part "$run" 'runtime.bgsweep')" 'BEGIN { printf "%.1f", a + b }')
  P[$run:verify_rest]=$(awk -v v="${P[$run:verify]}" -v e="${P[$run:ecdsa]}" -v c="${P[$run:claim]}" 'BEGIN { printf "%.1f", v - e - c }')
  P[$run:serve_rest]=$(awk -v s="${P[$run:serve]}" -v v="${P[$run:verify]}" 'BEGIN { printf "%.1f", s - v }')
  P[$run:other]=$(awk -v t="${P[$run:total]}" -v s="${P[$run:serve]}" -v a="${P[$run:sched]}" -v u="${P[$run:upstream]}" \
    -v c="${P[$run:client]}" -v g="${P[$run:gc]}" 'BEGIN { printf "%.1f", t - s - a - u - c - g }')
done
row() { # label key: the part in the four runs, and DPoP − Bearer in each mode
  local b1=${P[BenchmarkTokenRequest_Bearer:$2]} d1=${P[BenchmarkTokenRequest_DPoP:$2]}
  local bp=${P[BenchmarkTokenRequestParallel_Bearer:$2]} dp=${P[BenchmarkTokenRequestParallel_DPoP:$2]}
  awk -v l="$1" -v b1="$b1" -v d1="$d1" -v bp="$bp" -v dp="$dp" \
    'BEGIN { printf "| %s | %.0f | %.0f | %+.0f | %.0f | %.0f | %+.0f |\n", l, bp, dp, dp - bp, b1, d1, d1 - b1 }'
}
pd() { printf '%.0f' "${P[BenchmarkTokenRequestParallel_DPoP:$1]}"; }
pdiff() { awk -v d="${P[BenchmarkTokenRequest${1}_DPoP:$2]}" -v b="${P[BenchmarkTokenRequest${1}_Bearer:$2]}" 'BEGIN { printf "%.0f", d - b }'; }
ecdsa_us=$(pd ecdsa)
claim_us=$(pd claim)
read_us=$(pd verify_rest)
extra_us=$((dpop_us - bearer_us))
floor_us=$((ecdsa_us + claim_us))

{
  echo "# DPoP-bound vs Bearer session requests"
  echo
  echo "Generated by make bench-dpop (scripts/bench-dpop.sh); do not edit by hand. The steady-state"
  echo "GET /api/v2/payments (1 KB reply, cached upstream token, live session copy, real Redis) as a Go"
  echo "benchmark, sent as the cookie, as Authorization: Bearer (unbound session) and as Authorization: DPoP"
  echo "with a new ES256 proof per request (bound session; proofs signed before the clock starts, as the"
  echo "app signs them, and their garbage collected before it too). $ROUNDS rounds of $N requests of each"
  echo "kind, the kinds interleaved; medians; ratios to Bearer of this run. ns/op is the time per request,"
  echo "CPU the process's user+system time per request, ctxsw a thread of the process going to sleep"
  echo "(nothing to run: waiting for a socket) and being woken, Redis cmds what the edge's client sent per"
  echo "request (background canaries and lease renewals included, alike for all)."
  echo
  echo "$(uname -m), $(nproc) cores, $(grep '^cpu:' "$raw" | head -1 | sed 's/^cpu: //; s/ *$//'), $("$GO" env GOVERSION); load average"
  echo "$load0 at the start, $load1 at the end (on a machine shared with other work a load above its cores"
  echo "inflates every figure, and not all alike: compare runs made at similar loads)"
  echo
  echo "## Sent in parallel, as a loaded instance receives them (BenchmarkTokenRequestParallel)"
  echo
  echo "$inflight requests in flight (b.RunParallel, 8 per P), for every kind alike: while one waits on a socket"
  echo "(the upstream's answer; a DPoP one also the jti claim's in Redis) another runs, as on a busy instance."
  echo
  table Parallel | sed '/^#vars /d'
  echo
  echo "Goal: a DPoP request's CPU at most ${GOAL}× a Bearer one's: ${dpop_us} vs ${bearer_us} µs = ${cpu_ratio}× (the rounds: ${par_round_lo}× to ${par_round_hi}×): $result."
  echo
  echo "## Sent one at a time (BenchmarkTokenRequest)"
  echo
  echo "Each wait on a socket leaves the process with nothing to run: its threads sleep and are woken when"
  echo "the answer comes (ctxsw/op), a cost an idle instance pays per request and a loaded one does not. A"
  echo "DPoP request waits twice (the jti claim, then the upstream), a Bearer one once."
  echo
  table '' | sed '/^#vars /d'
  echo
  echo "One at a time: $(us "$one_dpop_cpu") vs $(us "$one_bearer_cpu") µs = ${one_ratio}× (the rounds: ${one_round_lo}× to ${one_round_hi}×)."
  echo
  echo "## Where a DPoP request's CPU goes"
  echo
  echo "One more run of the Bearer and the DPoP requests in each way, $PROF_N requests each, under the CPU"
  echo "profiler, which runs for the requests alone (not the setup, the signing of the proofs, or the"
  echo "deletion of their jti keys after). Per request, the cumulative CPU of the function that does each"
  echo "part (the profile's samples ÷ $PROF_N), in µs:"
  echo
  echo "| Part | in parallel: Bearer | DPoP | DPoP − Bearer | one at a time: Bearer | DPoP | DPoP − Bearer |"
  echo "|---|--:|--:|--:|--:|--:|--:|"
  row "the process's CPU, by getrusage (the profiled run's cpu-ns/op)" rusage
  row "the process's CPU, by the profile (all its samples)" total
  row "the request in the edge's goroutine (echo's ServeHTTP)" serve
  row "· of it, checking the proof (dpop.Verify)" verify
  row "· · of that, the ECDSA P-256 signature (crypto/ecdsa.VerifyASN1)" ecdsa
  row "· · of that, the jti claim in Redis (kv.Claims.SetNX: concurrent requests' claims in one pipeline; go-redis's write and read system calls)" claim
  row "· · of that, the rest: reading the proof, the key cache, htm, htu, iat, ath, jti" verify_rest
  row "· of it, the rest of the request (session, token, proxying, metrics, access log)" serve_rest
  row "the scheduler: goroutines parked, threads put to sleep and woken (runtime.mcall)" sched
  row "the test's upstream server (net/http's conn.serve)" upstream
  row "the edge's connections to it (net/http's persistConn read and write loops)" client
  row "the garbage collector's background work (gcBgMarkWorker, bgsweep)" gc
  row "the rest of the process" other
  echo
  echo "The profiler sees less than getrusage does where the process's threads are woken most (one at a"
  echo "time, DPoP): a thread's profiling timer is checked at the clock ticks that find the thread running,"
  echo "and gives one sample however many 10 ms periods it has run past, so threads woken to run a few µs"
  echo "at a time are found late and part of their time is not sampled."
  echo
  echo "Top of the DPoP profile in parallel (flat):"
  echo
  echo '```'
  "$GO" tool pprof -top -nodecount=15 "$work/edge.test" "$work/prof/BenchmarkTokenRequestParallel_DPoP.prof" 2>/dev/null | sed -n '/flat%/,$p'
  echo '```'
  echo
  echo "Raw:"
  echo
  echo '```'
  grep '^BenchmarkTokenRequest' "$raw"
  echo '```'
  echo
  echo "The profiled runs:"
  echo
  echo '```'
  grep '^BenchmarkTokenRequest' "$work/profraw"
  echo '```'
} >"$OUT"
cat "$OUT"

[ -n "$MD" ] && [ -f "$MD" ] || exit 0
# BENCHMARKS.md: the "DPoP-bound request" row at the end of the Goals
# table and its paragraph after it, replacing those of an earlier run.
row="| DPoP-bound request (\`make bench-dpop\`): CPU per request, sent in parallel | ≤ ${GOAL}× Bearer | ${dpop_us} vs ${bearer_us} µs = ${cpu_ratio}× | $result |"
para="**DPoP-bound requests** ([bench/dpop.txt](bench/dpop.txt), \`make bench-dpop\`: the steady-state GET as a Go benchmark in one process, against the same request as Bearer, $inflight in flight at once as a loaded instance receives them, medians of $ROUNDS interleaved rounds of $N, load average ${load0%% *} at the start on $(nproc) cores): a request with a new ES256 proof costs ${dpop_us} µs of CPU against Bearer's ${bearer_us} (${cpu_ratio}×, the rounds ${par_round_lo}× to ${par_round_hi}×; goal ≤ ${GOAL}×, ${goal_us} µs: $result), ${par_dpop_allocs} allocations against ${par_bearer_allocs}, and ${par_redis_more} Redis commands more (the jti claim). Sent one at a time it is ${one_ratio}× ($(us "$one_dpop_cpu") vs $(us "$one_bearer_cpu") µs): each of its two waits on a socket then puts the process's threads to sleep and wakes them (${one_dpop_ctxsw} context switches per request against ${one_bearer_ctxsw}), $(pdiff '' sched) µs more in the scheduler alone, a cost a loaded instance does not pay per request."
if [ "$result" = FAIL ]; then
  para="$para What bounds it (the CPU profiles in bench/dpop.txt, per request, in parallel): the ECDSA P-256 signature check (crypto/ecdsa) ${ecdsa_us} µs and the jti claim in Redis ${claim_us} µs (its share of one pipelined round trip: the claims of the requests in flight together, kv.Claims); reading the proof, its kept key and its claims is ${read_us} µs, and the rest of the request, the same code as Bearer's, costs $(pdiff Parallel serve_rest) µs more beside them. The goal leaves $((goal_us - bearer_us)) µs over Bearer; the signature check and the claim alone take ${floor_us} of the ${extra_us}. Reaching it would need a P-256 check cheaper than Go's constant-time one (a variable-time check with a table precomputed per bound key, which Go's crypto does not offer): the claim is already shared by the requests in flight, and refusing a proof replayed on any instance needs the shared store on the request's path (docs/operations.md, \"Replays: a jti cache, not server nonces\")."
fi
awk -v row="$row" -v para="$para" '
  /^\| DPoP-bound request / { next }
  /^\*\*DPoP-bound requests\*\*/ { skipblank = 1; next }
  skipblank && /^$/ { skipblank = 0; next }
  { skipblank = 0 }
  /^## Goals/ { goals = 1 }
  goals == 1 && /^\|/ { intable = 1 }
  goals == 1 && intable && !/^\|/ { print row; print; print para; print ""; goals = 2; intable = 0; next }
  { print }
  END { if (goals != 2) { print ""; print row; print ""; print para } }
' "$MD" >"$MD.tmp" && mv "$MD.tmp" "$MD"
echo "$MD: $row" >&2
