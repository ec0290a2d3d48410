#!/usr/bin/env bash
# tmm serve end to end (docs/serve.md): a tiny text model served on a loopback port that
# the server picks (--port 0), then
#   curl: /health, /v1/models, the raw server-sent events of a stream, and the errors in
#     OpenAI's shape (400 for malformed JSON, wrong types, unknown fields, long prompts;
#     401 without the key; 404, 405, 413; 503 with Retry-After when the queue is full);
#     idle connections closed; a client that hangs up mid-stream frees its slot;
#   the official openai JavaScript client (npm package openai, pinned by
#     tests/js-serve/package-lock.json, installed once into NODE_DIR; skipped, saying so,
#     only when the npm registry cannot be reached): completions, chat, streams, errors;
#   tools/serve_load.py: 8 seeded requests at once give the same tokens as each alone, and
#     8 streaming clients for 10 s (3 s under the sanitizers) with no error, no crossed
#     stream and every slot free afterwards;
#   a distilled checkpoint: served through its realizations, the same determinism;
#   tiny Mamba 2 and linear attention checkpoints (running states): the same determinism, and
#     a prompt of exactly the context gets one token;
#   SIGTERM: the requests in flight finish whole, nothing new is accepted, exit 0.
#   tests/serve_test.sh TMM NODE_DIR
set -uo pipefail
tmm="$(realpath "${1:?usage: serve_test.sh TMM NODE_DIR}")"
node_dir="${2:?usage: serve_test.sh TMM NODE_DIR}"
src="$(cd "$(dirname "$0")" && pwd)"
. "$src/lib.sh"
load_seconds=10
[ -n "${TMM_TEST_SANITIZED:-}" ] && load_seconds=3
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "serve_test.sh: needs $tool (tools/setup.sh --test installs it)"; exit 1; }
done

# start_server NAME ARGS...: tmm serve in the background ($pid), once it listens ($port, $url)
start_server() {
  local name="$1"; shift
  "$tmm" serve --port 0 "$@" > "$dir/$name.out" 2> "$dir/$name.err" &
  pid=$!
  for _ in $(seq 600); do
    port=$(sed -n 's/^tmm serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$dir/$name.out")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  url="http://127.0.0.1:$port"
  [ -n "$port" ] || { echo "FAIL: $name did not start:"; sed 's/^/    /' "$dir/$name.err" | tail -5; return 1; }
}
# stop_server: SIGTERM, and its exit status must be 0
stop_server() {
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
}

printf 'the quick brown fox jumps over the lazy dog.\n%.0s' $(seq 100) > "$dir/fox.txt"
check "train a tiny text model" "$tmm" train --d-model 32 --n-ctx 256 --layers 2 --batch 4 --task text \
  --data "$dir/fox.txt" --steps 40 --eval-every 0 --quiet --run-dir "$dir/fox"
expect_fail "serve without --checkpoint" 2 "required" "$tmm" serve
expect_fail "serve: a bad port" 2 "--port" "$tmm" serve --checkpoint "$dir/fox" --port 70000
expect_fail "serve: a missing checkpoint" 1 "cannot load the checkpoint" "$tmm" serve --checkpoint "$dir/none"
check "serve --help" "$tmm" serve --help

key=test-key-123
start_server main --checkpoint "$dir/fox" --model-name fox --slots 4 --queue 4 --api-key "$key" \
  --max-tokens 250 --max-body 8192 --idle-timeout 2 || { finish; exit 1; }
auth=(-H "Authorization: Bearer $key")
# http STATUS WORDS CURL-ARGS...: the response has that status and contains WORDS
http() {
  local want="$1" words="$2"; shift 2
  local got
  got=$(curl -s -o "$dir/body" -w '%{http_code}' "$@") || { echo "curl failed: $*"; return 1; }
  [ "$got" = "$want" ] || { echo "status $got, want $want: $(head -c 300 "$dir/body")"; return 1; }
  grep -q -- "$words" "$dir/body" || { echo "no '$words' in: $(head -c 300 "$dir/body")"; return 1; }
}
# an error body in OpenAI's shape: error.message, error.type, error.param and error.code
error_shape() {
  python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert set(e) == {"message", "type", "param", "code"} and e["message"] and e["type"], e' "$dir/body"
}
post() { # STATUS WORDS PATH BODY
  http "$1" "$2" "${auth[@]}" -H 'Content-Type: application/json' "$url$3" --data-binary "$4" && error_or_ok "$1"
}
error_or_ok() { [ "$1" = 200 ] || error_shape; }

check "/health needs no key" http 200 '"status":"ok"' "$url/health"
check "/v1/models without the key: 401" http 401 "API key" "$url/v1/models"
check "401: the error object" error_shape
check "/v1/models with a wrong key: 401" http 401 invalid_api_key -H "Authorization: Bearer nope" "$url/v1/models"
check "/v1/models" http 200 '"id":"fox"' "${auth[@]}" "$url/v1/models"
check "/v1/models/fox" http 200 '"object":"model"' "${auth[@]}" "$url/v1/models/fox"
check "/v1/models/other: 404" http 404 model_not_found "${auth[@]}" "$url/v1/models/other"
check "a completion" post 200 '"finish_reason":"length"' /v1/completions \
  '{"model": "fox", "prompt": "the quick", "max_tokens": 8, "seed": 1}'
check "a chat completion" post 200 '"role":"assistant"' /v1/chat/completions \
  '{"model": "fox", "messages": [{"role": "user", "content": "the quick"}], "max_tokens": 8}'
check "echo and logprobs with max_tokens 0 (scoring a text)" post 200 '"token_logprobs":\[null,' /v1/completions \
  '{"model": "fox", "prompt": "the quick brown", "max_tokens": 0, "echo": true, "logprobs": 1}'
check "stop sequences end the text before them" bash -c '
  curl -s "$@" | python3 -c "import json, sys
c = json.load(sys.stdin)[\"choices\"][0]
assert c[\"finish_reason\"] == \"stop\" and \"o\" not in c[\"text\"], c"' _ "${auth[@]}" "$url/v1/completions" \
  -d '{"model": "fox", "prompt": "the quick", "max_tokens": 200, "temperature": 0, "stop": ["o"]}'

# the raw server-sent events: one JSON object per event, the same id, one finish, then [DONE]
check "SSE: the raw stream" bash -c '
  curl -sN -D "$0.h" "$@" > "$0" && grep -qi "^content-type: text/event-stream" "$0.h" && python3 -c "import json, sys
lines = open(sys.argv[1]).read().split(\"\n\")
events = [l[6:] for l in lines if l.startswith(\"data: \")]
assert all(l == \"\" or l.startswith(\"data: \") for l in lines), lines
assert events[-1] == \"[DONE]\" and len(events) >= 3, events
objs = [json.loads(e) for e in events[:-1]]
assert len({o[\"id\"] for o in objs}) == 1 and all(o[\"object\"] == \"text_completion\" for o in objs)
assert [o[\"choices\"][0][\"finish_reason\"] for o in objs if o[\"choices\"]].count(\"length\") == 1, objs
assert objs[-1][\"choices\"] == [] and objs[-1][\"usage\"][\"completion_tokens\"] == 6, objs[-1]" "$0"' \
  "$dir/sse" "${auth[@]}" "$url/v1/completions" \
  -d '{"model": "fox", "prompt": "the", "max_tokens": 6, "stream": true, "stream_options": {"include_usage": true}}'
check "SSE: chat chunks open with the role" bash -c '
  curl -sN "$@" | grep -m1 "^data: " | grep -q "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"' _ \
  "${auth[@]}" "$url/v1/chat/completions" -d '{"model": "fox", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true}'

# bad requests: 400 with a message, and the server lives on
check "malformed JSON: 400" post 400 "not valid JSON" /v1/completions '{"model": "fox", "prompt": '
check "not an object: 400" post 400 "JSON object" /v1/completions '[1, 2]'
check "a wrong type: 400" post 400 "Invalid type for .max_tokens." /v1/completions '{"model": "fox", "prompt": "x", "max_tokens": "ten"}'
check "an unknown field: 400" post 400 "Unrecognized request argument supplied: prompts" /v1/completions '{"model": "fox", "prompts": "x"}'
check "a duplicate key: 400" post 400 "Duplicate key" /v1/completions '{"model": "fox", "prompt": "x", "prompt": "y"}'
check "out of range: 400" post 400 "top_p" /v1/completions '{"model": "fox", "prompt": "x", "top_p": 1.5}'
check "a fraction for n: 400" post 400 "Invalid type for 'n'" /v1/completions '{"model": "fox", "prompt": "x", "n": 1.5}'
check "max_tokens over --max-tokens: 400" post 400 "at most 250" /v1/completions '{"model": "fox", "prompt": "x", "max_tokens": 251}'
check "no model: 400" post 400 "model parameter" /v1/completions '{"prompt": "x"}'
check "an unknown model: 404" post 404 model_not_found /v1/completions '{"model": "gpt-4", "prompt": "x"}'
check "a bad message role: 400" post 400 "role" /v1/chat/completions '{"model": "fox", "messages": [{"role": "tool", "content": "x"}]}'
check "a token id past the vocabulary: 400" post 400 "prompt" /v1/completions '{"model": "fox", "prompt": [1, 99999]}'
check "a prompt longer than the context: 400" post 400 context_length_exceeded /v1/completions \
  "{\"model\": \"fox\", \"prompt\": \"$(printf 'x%.0s' $(seq 300))\"}"
check "a body over --max-body: 413" post 413 "max-body" /v1/completions \
  "{\"model\": \"fox\", \"prompt\": \"$(printf 'x%.0s' $(seq 9000))\"}"
check "more sequences than slots + queue: 400" post 400 "at most 8 at once" /v1/completions '{"model": "fox", "prompt": "x", "n": 9}'
check "an unknown URL: 404" http 404 "Invalid URL" "${auth[@]}" "$url/v1/nothing"
check "GET on a POST endpoint: 405" http 405 "not allowed" "${auth[@]}" "$url/v1/completions"
check "still healthy" http 200 '"slots_busy":0' "$url/health"

# the queue: 16 requests of 4 sequences each at once, 4 slots + 4 waiting: some get 503 and Retry-After
check "a full queue: 503 with Retry-After, the rest 200" bash -c '
  for i in $(seq 16); do
    curl -s -D "$0.$i.h" -o "$0.$i" -w "%{http_code}\n" "$@" &
  done > "$0.codes"; wait
  sort "$0.codes" | uniq -c
  ! grep -vqE "^(200|503)$" "$0.codes" && grep -q 503 "$0.codes" && grep -q 200 "$0.codes" &&
    grep -li "^retry-after: [0-9]" "$0".*.h | grep -q .' "$dir/q" "${auth[@]}" "$url/v1/completions" \
  -d '{"model": "fox", "prompt": "the", "n": 4, "max_tokens": 200}'

# an idle connection is closed after --idle-timeout (2 s)
check "idle connections closed" python3 -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
t = time.time()
assert s.recv(1) == b"" and time.time() - t < 9, "still open"' "$port"

# a client that hangs up mid-stream frees its slot (the cancellation is counted). Up to 5 tries: on a
# loaded machine (the sanitizer build beside another test) the server can have written the whole stream
# into the socket's buffers before the client is killed, and then nothing was left to cancel
cancelled() { curl -s "${auth[@]}" "$url/metrics" | sed -n 's/^tmm_cancelled_sequences_total //p'; }
hangup() {
  local before; before=$(cancelled)
  curl -sN "${auth[@]}" "$url/v1/completions" -d '{"model": "fox", "prompt": "the", "max_tokens": 250, "stream": true}' \
    > "$dir/hangup" &
  local cpid=$!
  for _ in $(seq 200); do grep -q '^data: ' "$dir/hangup" && break; sleep 0.02; done
  kill "$cpid"; wait "$cpid" 2>/dev/null
  for _ in $(seq 100); do
    m=$(curl -s "${auth[@]}" "$url/metrics")
    if echo "$m" | grep -q "^tmm_slots_busy 0$"; then
      [ "$(echo "$m" | sed -n "s/^tmm_cancelled_sequences_total //p")" -gt "$before" ]; return
    fi
    sleep 0.1
  done; echo "$m" | grep -E "slots_busy|cancelled"; return 1
}
hangups() { for try in 1 2 3 4 5; do hangup && return 0; echo "try $try: the stream ended before the hang-up"; done; return 1; }
check "a hang-up mid-stream frees its slot" hangups

# the official openai client
mkdir -p "$node_dir"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  failed=$((failed + 1)); echo "FAIL: needs node and npm (tools/setup.sh --test installs them)"
elif ! cmp -s "$src/js-serve/package-lock.json" "$node_dir/package-lock.json" || [ ! -d "$node_dir/node_modules/openai" ]; then
  cp "$src/js-serve/package.json" "$src/js-serve/package-lock.json" "$node_dir/"
  if ! (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) > "$dir/npm.log" 2>&1; then
    rm -f "$node_dir/package-lock.json"
    if (cd "$node_dir" && timeout 30 npm ping) > /dev/null 2>&1; then
      failed=$((failed + 1)); echo "FAIL: npm ci of the openai client failed:"; tail -5 "$dir/npm.log"
    else
      echo "SKIP: the openai JavaScript client checks: the npm registry cannot be reached to install it"
    fi
  fi
fi
if [ -d "$node_dir/node_modules/openai" ] && cmp -s "$src/js-serve/package-lock.json" "$node_dir/package-lock.json"; then
  cp "$src/js-serve/client.mjs" "$node_dir/"
  check "the openai JavaScript client" node "$node_dir/client.mjs" "$url/v1" "$key" fox
fi

# concurrency: determinism, then a bounded load with 8 clients
check "8 seeded requests at once: each the same as alone" python3 "$src/../tools/serve_load.py" determinism \
  --url "$url" --api-key "$key" --requests 8 --max-tokens 40
check "load: 8 streaming clients, no error, no crossed stream, slots free after" python3 "$src/../tools/serve_load.py" \
  load --url "$url" --api-key "$key" --clients 8 --seconds "$load_seconds" --max-tokens 24
grep "tokens/s" "$dir/out" | sed 's/^/    /'
check "metrics: Prometheus text" bash -c 'curl -s "$@" | python3 -c "import sys
m = {}
for l in sys.stdin:
    if l.strip() and not l.startswith(\"#\"):
        k, v = l.rsplit(None, 1)
        m[k] = float(v)
for k in (\"tmm_generation_tokens_total\", \"tmm_prompt_tokens_total\", \"tmm_time_to_first_token_seconds_count\",
          \"tmm_time_per_output_token_seconds_count\", \"tmm_slots_total\"):
    assert m.get(k, 0) > 0, (k, m.get(k))
assert m[\"tmm_slots_busy\"] == 0 and m[\"tmm_queue_depth\"] == 0 and m[\"tmm_requests_in_flight\"] == 0, m
assert m[\"tmm_requests_total{endpoint=\\\"/v1/completions\\\",code=\\\"400\\\"}\"] >= 10, m"' _ "${auth[@]}" "$url/metrics"

# SIGTERM: the streams in flight end whole, the port closes, exit 0
for i in 1 2 3; do
  curl -sN "${auth[@]}" "$url/v1/completions" -d '{"model": "fox", "prompt": "the", "max_tokens": 200, "stream": true}' \
    > "$dir/drain$i" &
done
for _ in $(seq 200); do grep -q '^data: ' "$dir/drain1" "$dir/drain2" "$dir/drain3" 2>/dev/null && break; sleep 0.02; done
kill -TERM "$pid"
wait "$pid"
rc=$?
wait
check "SIGTERM: exit 0" test "$rc" -eq 0
check "SIGTERM: the streams in flight finished" bash -c 'for f in "$@"; do
  tail -3 "$f" | grep -q "^data: \[DONE\]" && grep -qE "\"finish_reason\":\"(length|stop)\"" "$f" || { echo "$f:"; tail -c 300 "$f"; exit 1; }
done' _ "$dir/drain1" "$dir/drain2" "$dir/drain3"
check "SIGTERM: it drained requests in flight" grep -qE "no new requests; finishing the [1-9][0-9]* in flight" "$dir/main.err"
check "SIGTERM: the port is closed" bash -c '! curl -s --max-time 5 "$0/health"' "$url"

# a distilled checkpoint decodes through its realizations, with the same determinism
check "distill the model" "$tmm" distill --checkpoint "$dir/fox" --out "$dir/fox-distilled" --order 8 --quiet
if start_server distilled --checkpoint "$dir/fox-distilled" --slots 8 --quiet; then
  check "distilled: /health says so" http 200 '"distilled":true' "$url/health"
  check "distilled: 8 seeded requests at once, each the same as alone" python3 "$src/../tools/serve_load.py" \
    determinism --url "$url" --requests 8 --max-tokens 40
  check "distilled: SIGTERM, exit 0" stop_server
else
  failed=$((failed + 1))
fi
# every interface without an API key: it serves, and says on its error output that anyone may use it
"$tmm" serve --checkpoint "$dir/fox" --host 0.0.0.0 --port 0 --quiet > "$dir/open.out" 2> "$dir/open.err" &
open_pid=$!
for _ in $(seq 600); do grep -q "listening on" "$dir/open.out" && break; kill -0 "$open_pid" 2>/dev/null || break; sleep 0.1; done
check "serve --host 0.0.0.0 without a key warns" grep -q "warning: listening on 0.0.0.0 without an API key" "$dir/open.err"
kill -TERM "$open_pid" 2>/dev/null; wait "$open_pid"

# the running states (Mamba 2's SSM state, linear attention's sums): a slot restarts and
# prefills alone while the others decode; a prompt of exactly the context gets its one token
for arch in mamba2 linear; do
  check "train a tiny $arch model" "$tmm" train --arch "$arch" --d-model 16 --n-ctx 64 --layers 1 --batch 2 \
    --task text --data "$dir/fox.txt" --steps 4 --eval-every 0 --quiet --run-dir "$dir/$arch"
  if start_server "$arch" --checkpoint "$dir/$arch" --slots 4 --quiet; then
    check "$arch: 8 seeded requests at once, each the same as alone" python3 "$src/../tools/serve_load.py" \
      determinism --url "$url" --requests 8 --max-tokens 16
    check "$arch: a prompt of the whole context: one token, length" http 200 '"completion_tokens":1,' \
      -H 'Content-Type: application/json' "$url/v1/completions" \
      --data-binary "{\"model\": \"$arch\", \"prompt\": \"$(printf 'a%.0s' $(seq 64))\", \"max_tokens\": 5}"
    check "$arch: SIGTERM, exit 0" stop_server
  else
    failed=$((failed + 1))
  fi
done
check "no validation messages" bash -c '! grep -h "tmm: validation" "$@"' _ "$dir"/*.err
finish
