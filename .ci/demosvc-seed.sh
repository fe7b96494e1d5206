# Sourced by .ci/blackbox and .ci/compare-posts: starts a demosvc build the
# way the load commands measure it and seeds it.
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
