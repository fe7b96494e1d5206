# Sourced by .ci/blackbox, .ci/compare-posts and .ci/compare-reads: starts a
# demosvc build the way the load commands measure it and seeds it, starts
# the bare baseline server, reads a process's CPU, and sums up rounds run
# side by side.
#
# start_demosvc BIN DIR: runs BIN serve on a fresh data dir under DIR with
# production settings (default timeouts, a text log at info, one access
# line per request, written to DIR/server.log), then creates an unlimited
# account, its key, an agent and one session. Sets demosvc_pid, api (the
# base URL), key, create (a session's body); writes DIR/created.json (the
# session's answer) and DIR/post.lua (wrk's script to POST it). Leaves
# DEMOSVC_DATA_DIR set to the data dir, for more CLI calls.
start_demosvc() {
  local bin=$1 dir=$2 agent acc
  export DEMOSVC_DATA_DIR=$dir/data DEMOSVC_LOG_FORMAT=text DEMOSVC_LOG_LEVEL=info
  "$bin" serve --listen 127.0.0.1:0 >"$dir/server.log" 2>&1 &
  demosvc_pid=$!
  listen() { sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$DEMOSVC_DATA_DIR/serve.json" 2>/dev/null; }
  for _ in $(seq 300); do
    [ -n "$(listen)" ] && curl -fs "http://$(listen)/readyz" >/dev/null && break
    sleep 0.1
  done
  api=http://$(listen || true)
  curl -fs "$api/readyz" >/dev/null || { echo "$bin did not start:" >&2; cat "$dir/server.log" >&2; return 1; }
  acc=$("$bin" accounts create --name Bench --plan enterprise | sed 's/.*"id":"\(acc_[^"]*\)".*/\1/')
  key=$("$bin" keys create --account "$acc" | sed 's/.*"key":"\([^"]*\)".*/\1/')
  agent=$(curl -fs -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"name":"Bench","sandbox_url":"https://sandbox.example.com/"}' "$api/v1/agents" | sed 's/.*"id":"\(agt_[^"]*\)".*/\1/')
  create='{"agent_id":"'$agent'","contact":{"name":"Pat","email":"pat@example.com","company":"Initech"}}'
  curl -fs -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "$create" "$api/v1/sessions" >"$dir/created.json"
  cat >"$dir/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$create'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
LUA
}

# more_sessions: 30 more sessions on the server start_demosvc started last,
# so that the list of 20 is full.
more_sessions() {
  for _ in $(seq 30); do
    curl -fs -H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "$create" "$api/v1/sessions" >/dev/null
  done
}

# settle PID: waits until the server is idle, using at most 5% of a core
# over a second, for at most 3 minutes, and says how long that took. The
# reads are measured once the writes before them are digested (the
# snapshot and the compactions they set off, the chain's verification),
# which could otherwise land in the first read rounds, demosvc's or the
# bare server's alike, as the two share the machine. A second under 5%
# does not rule out work that waits on the disk.
settle() {
  local pid=$1 t0 t1 waited=0 idle=
  while (( waited < 180 )); do
    t0=$(cputicks "$pid"); sleep 1; t1=$(cputicks "$pid"); waited=$((waited + 1))
    if (( (t1 - t0) * 20 <= hz )); then idle=1; break; fi
  done
  if [ -n "$idle" ]; then echo "settled: demosvc idle after ${waited} s"
  else echo "demosvc still busy after ${waited} s; measuring the reads anyway" >&2; fi
}

# fill N: POSTs about N more sessions (up to 64 over) to the server
# start_demosvc started last, with wrk at 64 connections, so that reads
# are measured against a state and heap the size a write load leaves.
# wrk's script stops sending at N answers; wrk itself runs until killed.
fill() {
  local n=$1 lua wrk_pid created
  lua=$(dirname "$DEMOSVC_DATA_DIR")/fill.lua
  { cat "$(dirname "$DEMOSVC_DATA_DIR")/post.lua"
    cat <<LUA
local done = 0
function response(status)
  done = done + 1
  if done >= $n then wrk.thread:stop() end
end
LUA
  } >"$lua"
  wrk -t1 -c64 -d30m -s "$lua" "$api/v1/sessions" >/dev/null &
  wrk_pid=$!
  while :; do
    sleep 1
    created=$(curl -fs "$api/metrics" | awk '/^demosvc_http_requests_total/ && /route="\/v1\/sessions"/ && /method="POST"/ && /code="201"/ {print $2}')
    (( ${created:-0} >= n )) && break
    kill -0 "$wrk_pid" 2>/dev/null || { echo "fill: wrk stopped at ${created:-0} sessions" >&2; return 1; }
  done
  kill "$wrk_pid" 2>/dev/null; wait "$wrk_pid" 2>/dev/null || true
}

# bare NAME ARGS...: starts $work/bareserve with ARGS, adds it to pids, and
# sets bare_NAME to its URL and pid_NAME to its pid.
bare() {
  local name=$1; shift
  "$work/bareserve" "$@" >"$work/$name.addr" 2>"$work/$name.log" &
  pids+=($!)
  printf -v "pid_$name" '%s' $!
  for _ in $(seq 100); do [ -s "$work/$name.addr" ] && break; sleep 0.1; done
  printf -v "bare_$name" 'http://%s' "$(cat "$work/$name.addr")"
}

# cputicks PID: the CPU time the process has used, in clock ticks (hz a
# second).
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# side_by_side LABEL N NAMES < RESULTS: RESULTS holds lines "server round
# req/s cpu_µs"; server N is the bare one, NAMES (space-separated) names
# servers 1..N. Prints per server the median req/s, the median CPU per
# request, the median of the rounds' ratios to server N, and each round's.
side_by_side() {
  awk -v label="$1" -v n="$2" -v names="$3" '
    function median(a, k,   i, j, t) {
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { rps[$1, $2] = $3; cpu[$1, $2] = $4; if ($2 > rounds) rounds = $2 }
    END {
      split(names, name, " ")
      for (j = 1; j <= n; j++) {
        delete x; delete y; delete z; line = ""
        for (r = 1; r <= rounds; r++) {
          x[r] = rps[j, r]; y[r] = cpu[j, r]; z[r] = rps[j, r] / rps[n, r]
          line = line sprintf(" %.2f/%.1f", z[r], cpu[j, r])
        }
        printf "%-5s %-20s req/s %6.0f  cpu µs/request %5.1f  ratio %.2f  rounds (ratio/µs):%s\n", label, name[j], median(x, rounds), median(y, rounds), median(z, rounds), line
      }
    }'
}
