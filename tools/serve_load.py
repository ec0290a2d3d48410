#!/usr/bin/env python3
"""Load and determinism checks against a running `tmm serve` (docs/serve.md).

  tools/serve_load.py load --url http://127.0.0.1:8080 --clients 8 --seconds 10 [--max-tokens 32] [--json]
      CLIENTS threads stream completions (each with its own seed) for SECONDS; then a sample of
      them is asked again, alone and without streaming, and must return the same text (no crossed
      streams); then /metrics must show no busy slot and an empty queue. Prints tokens/s and the
      p50/p99 time to first token and time per output token, as the clients saw them.
  tools/serve_load.py determinism --url URL [--requests 8] [--max-tokens 24]
      REQUESTS seeded requests at once, then each alone: the same tokens (and log-probabilities).

Exit status 0 when every check passed, 1 otherwise (the failures on stderr). Python's standard
library only."""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

PROMPTS = ["the quick brown", "over the lazy", "jumps over", "the dog", "a fox", "quick brown fox jumps",
           "lazy dog.", "the"]


class Client:
    def __init__(self, url, key=None, timeout=120):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = "Bearer " + key

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def post(self, path, body):
        c = self.conn()
        try:
            c.request("POST", path, json.dumps(body), self.headers)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def get(self, path):
        c = self.conn()
        try:
            c.request("GET", path, headers=self.headers)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def stream(self, path, body):
        """POSTs with stream: true; returns (id, text, finish, usage, event times) or raises."""
        c = self.conn()
        try:
            t0 = time.monotonic()
            c.request("POST", path, json.dumps(dict(body, stream=True, stream_options={"include_usage": True})),
                      self.headers)
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError("status %d: %s" % (r.status, r.read()[:300]))
            ids, text, finish, usage, times, done = set(), [], None, None, [], False
            for raw in r:
                line = raw.decode().rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                ev = json.loads(data)
                if "error" in ev:
                    raise RuntimeError("error event: %s" % ev["error"])
                ids.add(ev["id"])
                if ev.get("usage"):
                    usage = ev["usage"]
                for ch in ev["choices"]:
                    if ch["index"] != 0:
                        raise RuntimeError("a choice index %d in a one-choice stream" % ch["index"])
                    piece = ch.get("text", ch.get("delta", {}).get("content")) or ""
                    if piece:
                        text.append(piece)
                        times.append(time.monotonic() - t0)
                    if ch.get("finish_reason"):
                        finish = ch["finish_reason"]
            if not done:
                raise RuntimeError("the stream ended without data: [DONE]")
            if len(ids) != 1:
                raise RuntimeError("events of %d different ids in one stream: %s" % (len(ids), sorted(ids)))
            return ids.pop(), "".join(text), finish, usage, times
        finally:
            c.close()


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def model_of(cl):
    status, body = cl.get("/v1/models")
    if status != 200:
        raise SystemExit("serve_load.py: GET /v1/models answered %d: %s" % (status, body[:200]))
    return json.loads(body)["data"][0]["id"]


def load(args):
    cl = Client(args.url, args.api_key)
    model = model_of(cl)
    stop_at = time.monotonic() + args.seconds
    lock = threading.Lock()
    done, errors, ttft, itl = [], [], [], []
    tokens = [0]

    def worker(k):
        i = 0
        while time.monotonic() < stop_at:
            seed = 1000 * k + i
            body = {"model": model, "prompt": PROMPTS[(k + i) % len(PROMPTS)], "max_tokens": args.max_tokens,
                    "seed": seed, "temperature": 1.0}
            try:
                _, text, finish, usage, times = cl.stream("/v1/completions", body)
                if finish not in ("stop", "length"):
                    raise RuntimeError("finish_reason %r" % finish)
                if not usage or usage["completion_tokens"] < 1:
                    raise RuntimeError("no usage chunk, or no token: %r" % usage)
                with lock:
                    done.append((body, text))
                    tokens[0] += usage["completion_tokens"]
                    if times:
                        ttft.append(times[0])
                        itl.extend(b - a for a, b in zip(times, times[1:]))
            except Exception as e:  # noqa: BLE001 (every failure is reported)
                with lock:
                    errors.append("client %d: %s" % (k, e))
            i += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    # no crossed streams: a sample asked again, alone and whole, gives the same text
    for body, text in done[:: max(1, len(done) // args.replay)][: args.replay]:
        status, r = cl.post("/v1/completions", body)
        if status != 200 or r["choices"][0]["text"] != text:
            errors.append("replay of seed %d: status %d, %r streamed, %r alone" %
                          (body["seed"], status, text, r.get("choices", [{}])[0].get("text")))
    status, metrics = cl.get("/metrics")
    gauges = {l.split()[0]: float(l.split()[1]) for l in metrics.splitlines() if l and not l.startswith("#")}
    if gauges.get("tmm_slots_busy") != 0 or gauges.get("tmm_queue_depth") != 0:
        errors.append("after the load: tmm_slots_busy %s, tmm_queue_depth %s (both should be 0)" %
                      (gauges.get("tmm_slots_busy"), gauges.get("tmm_queue_depth")))
    result = {"clients": args.clients, "seconds": round(wall, 2), "requests": len(done), "errors": len(errors),
              "tokens": tokens[0], "tokens_per_s": round(tokens[0] / wall, 1),
              "ttft_p50_ms": round(1e3 * pct(ttft, 50), 1), "ttft_p99_ms": round(1e3 * pct(ttft, 99), 1),
              "tpot_p50_ms": round(1e3 * pct(itl, 50), 2), "tpot_p99_ms": round(1e3 * pct(itl, 99), 2)}
    if args.json:
        print(json.dumps(result))
    else:
        print("%(clients)d clients, %(seconds)s s: %(requests)d requests, %(tokens)d tokens, %(tokens_per_s)s tokens/s; "
              "time to first token p50 %(ttft_p50_ms)s ms, p99 %(ttft_p99_ms)s ms; per token p50 %(tpot_p50_ms)s ms, "
              "p99 %(tpot_p99_ms)s ms; %(errors)d errors" % result)
    for e in errors[:20]:
        print("serve_load.py: " + e, file=sys.stderr)
    return 1 if errors or not done else 0


def determinism(args):
    cl = Client(args.url, args.api_key)
    model = model_of(cl)
    bodies = [{"model": model, "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": args.max_tokens, "seed": 7 + i,
               "temperature": 1.0, "logprobs": 2} for i in range(args.requests)]
    together = [None] * len(bodies)
    start = threading.Barrier(len(bodies))

    def one(i):
        start.wait()
        together[i] = cl.post("/v1/completions", bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = 0
    for i, body in enumerate(bodies):
        alone = cl.post("/v1/completions", body)
        a, b = together[i], alone
        if a[0] != 200 or b[0] != 200:
            print("serve_load.py: request %d: status %d together, %d alone" % (i, a[0], b[0]), file=sys.stderr)
            bad += 1
            continue
        ca, cb = a[1]["choices"][0], b[1]["choices"][0]
        if ca["text"] != cb["text"] or ca["logprobs"] != cb["logprobs"]:
            print("serve_load.py: seed %d: %r beside %d others, %r alone" %
                  (body["seed"], ca["text"], len(bodies) - 1, cb["text"]), file=sys.stderr)
            bad += 1
    print("%d seeded requests: %d the same beside %d others as alone" % (len(bodies), len(bodies) - bad,
                                                                         len(bodies) - 1))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["load", "determinism"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--api-key")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--replay", type=int, default=8, help="load: requests asked again alone (default 8)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.exit(load(args) if args.mode == "load" else determinism(args))


if __name__ == "__main__":
    main()
