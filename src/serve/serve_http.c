/* The HTTP side of tmm serve (serve.h): libmicrohttpd with a thread per
 * connection, so that a handler may wait for its tokens; routes,
 * authentication, body limits, the API's responses and server-sent events. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve/serve.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_json.h"
#include "serve/serve_metrics.h"
#include "serve/serve_request.h"
#include "serve/serve_sched.h"

#define SSE_KEEPALIVE 10.0   /* seconds without an event before a comment line keeps the stream alive */
#define POLL_MS 250          /* how often a waiting handler looks for its client's hang-up */

struct tmm_server {
    tmm_serve_config c;
    char *host, *api_key, *model;
    tmm_generator *gen;
    const tmm_generator_info *info;
    serve_metrics metrics;
    serve_sched *sched;
    struct MHD_Daemon *d;
    uint16_t port;
    long long created;
    pthread_mutex_t lock;  /* the fields below */
    uint32_t in_flight;
    bool draining;
    uint64_t ids;
    MHD_socket quiesced;   /* the listening socket after MHD_quiesce_daemon */
};

/* One request on a connection. */
typedef struct conn_req {
    tmm_server *S;
    struct MHD_Connection *conn;
    serve_endpoint ep;
    char method[8], path[96];
    double t0;
    tmm_bytes body;
    bool too_large;
    int status;
    /* a generation */
    serve_job *job;
    serve_reply reply;
    uint64_t prompt_tokens;
    bool counted;          /* in S->in_flight */
    bool stream;
    /* a stream */
    tmm_bytes sse;
    size_t sse_sent;
    bool sse_end, roles_sent;
    uint32_t *sent_text, *sent_entries;
    bool *sent_finish;
    uint64_t seen;
    double last_event;
} conn_req;

/* ---- responses ---------------------------------------------------------------------- */

static enum MHD_Result send_body(conn_req *r, int status, const char *type, char *body, size_t length,
                                 const char *const *headers)
{
    r->status = status;
    if (!body) { /* out of memory while writing it */
        r->status = 500;
        return MHD_NO;
    }
    struct MHD_Response *res = MHD_create_response_from_buffer(length, body, MHD_RESPMEM_MUST_FREE);
    if (!res) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    for (size_t i = 0; headers && headers[i]; i += 2)
        MHD_add_response_header(res, headers[i], headers[i + 1]);
    const enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, res);
    MHD_destroy_response(res);
    return ok;
}

static enum MHD_Result send_json(conn_req *r, int status, serve_jw *w, const char *const *headers)
{
    size_t len;
    char *body = jw_take(w, &len);
    return send_body(r, status, "application/json", body, len, headers);
}

static enum MHD_Result send_error_h(conn_req *r, const serve_error *e, const char *const *headers)
{
    serve_jw w = { 0 };
    serve_json_error(&w, e);
    return send_json(r, e->status, &w, headers);
}

static enum MHD_Result send_error(conn_req *r, const serve_error *e) { return send_error_h(r, e, NULL); }

/* ---- helpers ------------------------------------------------------------------------------ */

/* True when the client has closed its end of the connection. */
static bool peer_gone(conn_req *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    struct pollfd p = { .fd = ci->connect_fd, .events = POLLRDHUP };
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void set_timeout(conn_req *r, unsigned seconds)
{
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/* Constant-time comparison of the bearer token with the key. */
static bool authorized(const tmm_server *S, struct MHD_Connection *conn)
{
    if (!S->api_key)
        return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    const char *t = h + 7;
    while (*t == ' ')
        t++;
    const size_t n = strlen(t), m = strlen(S->api_key);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(t[i] ^ S->api_key[i % (m ? m : 1)]);
    return diff == 0;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A fresh 64-bit number: request ids and the seeds of unseeded requests. */
static uint64_t fresh(tmm_server *S)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    pthread_mutex_lock(&S->lock);
    const uint64_t n = ++S->ids;
    pthread_mutex_unlock(&S->lock);
    return mix64(((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) ^ mix64(n));
}

/* ---- the simple endpoints ---------------------------------------------------------------------- */

static enum MHD_Result health(conn_req *r)
{
    tmm_server *S = r->S;
    uint32_t queued, busy;
    serve_sched_load(S->sched, &queued, &busy);
    pthread_mutex_lock(&S->lock);
    const bool draining = S->draining;
    pthread_mutex_unlock(&S->lock);
    serve_jw w = { 0 };
    jw_obj(&w);
    jw_key(&w, "status"), jw_cstr(&w, draining ? "draining" : "ok");
    jw_key(&w, "model"), jw_cstr(&w, S->model);
    jw_key(&w, "slots"), jw_int(&w, S->info->batch);
    jw_key(&w, "slots_busy"), jw_int(&w, busy);
    jw_key(&w, "queue"), jw_int(&w, queued);
    jw_key(&w, "n_ctx"), jw_int(&w, S->info->config.n_ctx);
    jw_key(&w, "distilled"), jw_bool(&w, S->info->distilled);
    jw_end(&w);
    return send_json(r, draining ? 503 : 200, &w, NULL);
}

static enum MHD_Result metrics(conn_req *r)
{
    tmm_bytes b = { 0 };
    if (!serve_metrics_render(&r->S->metrics, r->S->model, &b)) {
        free(b.data);
        return MHD_NO;
    }
    return send_body(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.length, NULL);
}

static enum MHD_Result models(conn_req *r, const char *id)
{
    serve_jw w = { 0 };
    serve_error e;
    if (id && strcmp(id, r->S->model) != 0) {
        serve_err(&e, 404, "invalid_request_error", "model_not_found", "model",
                  "The model '%.100s' does not exist; this server serves '%.100s'.", id, r->S->model);
        return send_error(r, &e);
    }
    serve_json_models(&w, r->S->model, r->S->created, id != NULL);
    return send_json(r, 200, &w, NULL);
}

/* ---- generation ------------------------------------------------------------------------------------ */

/* The job of a parsed request: its prompts tokenized and checked against
 * the context, its sequences (prompt i, choice k: index i n + k) with their
 * samplers. false with *e filled. */
static bool make_job(tmm_server *S, serve_request *q, serve_job **out, uint64_t *prompt_tokens, serve_error *e)
{
    const uint32_t n_ctx = S->info->config.n_ctx;
    uint32_t max = q->has_max_tokens ? q->max_tokens : q->kind == SERVE_CHAT ? S->c.max_tokens : 16;
    if (q->has_max_tokens && max > S->c.max_tokens)
        return serve_bad(e, "max_tokens", "max_tokens is too large: %u. This server allows at most %u tokens per "
                         "request (tmm serve --max-tokens).", max, S->c.max_tokens);
    max = max < S->c.max_tokens ? max : S->c.max_tokens;
    serve_job *job = calloc(1, sizeof *job);
    if (!job || !(job->seqs = calloc((size_t)q->n_prompts * q->n, sizeof *job->seqs))) {
        free(job);
        return serve_err(e, 500, "server_error", NULL, NULL, "The server is out of memory.");
    }
    job->n_seqs = q->n_prompts * q->n;
    job->echo = q->echo, job->logprobs = q->logprobs, job->top_logprobs = q->top_logprobs;
    job->stops = q->stops;
    memset(&q->stops, 0, sizeof q->stops);
    const uint64_t base_seed = q->has_seed ? q->seed : fresh(S);
    bool ok = serve_job_init(job) == TMM_OK ||
              serve_err(e, 500, "server_error", NULL, NULL, "The server cannot make a condition variable.");
    *prompt_tokens = 0;
    for (uint32_t i = 0; ok && i < q->n_prompts; i++) {
        const serve_prompt *p = &q->prompts[i];
        uint32_t *tokens = NULL, count = 0;
        bool memory = true;
        if (p->text) {
            if (tmm_tokenize(S->gen, p->text, p->length, &tokens, &count) != TMM_OK) {
                ok = serve_bad(e, q->kind == SERVE_CHAT ? "messages" : "prompt",
                               "The prompt cannot be encoded by the model's tokenizer (%s): %s", S->info->tokenizer,
                               tmm_last_error());
                break;
            }
        } else if ((tokens = malloc(p->count * sizeof *tokens))) {
            memcpy(tokens, p->tokens, p->count * sizeof *tokens);
            count = p->count;
        } else {
            memory = false;
        }
        if (memory && count == 0) { /* an empty prompt: the start of a document, if the model knows one */
            uint32_t *one = S->info->eot != UINT32_MAX ? realloc(tokens, sizeof *tokens) : NULL;
            if (one)
                tokens = one, tokens[0] = S->info->eot, count = 1;
            memory = one || S->info->eot == UINT32_MAX;
        }
        if (!memory || count == 0) {
            free(tokens);
            ok = !memory ? serve_err(e, 500, "server_error", NULL, NULL, "The server is out of memory.")
                         : serve_bad(e, "prompt", "The prompt is empty, and the model's tokenizer has no end-of-text "
                                     "token to begin with.");
            break;
        }
        if (count > n_ctx) {
            free(tokens);
            ok = serve_err(e, 400, "invalid_request_error", "context_length_exceeded",
                           q->kind == SERVE_CHAT ? "messages" : "prompt",
                           "This model's maximum context length is %u tokens, however your prompt has %u tokens. "
                           "Please reduce the length of the prompt.", n_ctx, count);
            break;
        }
        *prompt_tokens += count;
        for (uint32_t k = 0; ok && k < q->n; k++) {
            serve_seq *s = &job->seqs[i * q->n + k];
            if (k == 0) {
                s->prompt = tokens;
            } else if ((s->prompt = malloc(count * sizeof *tokens))) {
                memcpy(s->prompt, tokens, count * sizeof *tokens);
            } else {
                ok = serve_err(e, 500, "server_error", NULL, NULL, "The server is out of memory.");
                break;
            }
            s->prompt_len = count;
            /* the context ends a sequence too: n_ctx - count more tokens, and one sampled at the end */
            s->max_tokens = max < n_ctx - count + 1 ? max : n_ctx - count + 1;
            s->sampler = (tmm_sampler){ .temperature = q->temperature, .top_k = q->top_k,
                                        .top_p = q->top_p > 0 ? q->top_p : 1.0f, .greedy = q->top_p == 0,
                                        .seed = base_seed + k };
        }
    }
    if (!ok) {
        serve_job_free(job);
        return false;
    }
    *out = job;
    return true;
}

/* Waits for a whole (non-stream) answer; MHD_NO when the client left. */
static enum MHD_Result answer(conn_req *r)
{
    tmm_server *S = r->S;
    set_timeout(r, 0);
    while (!serve_sched_wait(S->sched, r->job, &r->seen, POLL_MS))
        if (peer_gone(r)) {
            serve_sched_cancel(S->sched, r->job);
            r->status = 499;
            return MHD_NO;
        }
    set_timeout(r, S->c.idle_timeout);
    serve_sched_lock(S->sched);
    serve_jw w = { 0 };
    serve_error e;
    if (r->job->error[0])
        serve_err(&e, 500, "server_error", NULL, NULL, "The generation failed: %s", r->job->error);
    else
        serve_json_response(&w, &r->reply, r->job, r->prompt_tokens);
    serve_sched_unlock(S->sched);
    return r->job->error[0] ? send_error(r, &e) : send_json(r, 200, &w, NULL);
}

/* Appends to r->sse the events for what the job has produced since the last
 * call (lock held); at its end the finish reasons, usage and [DONE]. */
static void collect(conn_req *r)
{
    serve_job *job = r->job;
    serve_jw w = { .out = r->sse };
    r->sse = (tmm_bytes){ 0 };
    bool all_done = true;
    for (uint32_t i = 0; i < job->n_seqs; i++) {
        const serve_seq *q = &job->seqs[i];
        serve_delta d = { .index = i, .role = r->reply.kind == SERVE_CHAT && !r->roles_sent };
        d.text = q->out.data ? q->out.data + r->sent_text[i] : NULL;
        d.length = q->out.length - r->sent_text[i];
        d.entries = q->entries ? q->entries + r->sent_entries[i] : NULL;
        d.n_entries = q->n_entries - r->sent_entries[i];
        if (q->done && !r->sent_finish[i] && !job->error[0])
            d.finish = q->finish ? q->finish : "length";
        all_done = all_done && q->done;
        if (d.role || d.length || d.n_entries || d.finish)
            serve_json_chunk(&w, &r->reply, &d);
        r->sent_text[i] = (uint32_t)q->out.length;
        r->sent_entries[i] = q->n_entries;
        r->sent_finish[i] = r->sent_finish[i] || d.finish;
    }
    r->roles_sent = true;
    if (all_done) {
        if (job->error[0]) {
            serve_error e;
            serve_err(&e, 500, "server_error", NULL, NULL, "The generation failed: %s", job->error);
            jw_raw(&w, "data: ");
            serve_json_error(&w, &e);
            jw_raw(&w, "\n\n");
        } else if (r->reply.include_usage) {
            uint64_t completion = 0;
            for (uint32_t i = 0; i < job->n_seqs; i++)
                completion += job->seqs[i].completion_tokens;
            serve_json_usage_chunk(&w, &r->reply, r->prompt_tokens, completion);
        }
        jw_raw(&w, "data: [DONE]\n\n");
        r->sse_end = true;
    }
    if (w.failed) { /* out of memory: end the stream */
        jw_free(&w);
        r->sse_end = true;
        return;
    }
    r->sse = w.out;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    conn_req *r = cls;
    tmm_server *S = r->S;
    for (;;) {
        if (r->sse_sent < r->sse.length) {
            size_t n = r->sse.length - r->sse_sent < max ? r->sse.length - r->sse_sent : max;
            memcpy(buf, r->sse.data + r->sse_sent, n);
            r->sse_sent += n;
            if (r->sse_sent == r->sse.length)
                r->sse_sent = r->sse.length = 0;
            r->last_event = serve_now();
            return (ssize_t)n;
        }
        if (r->sse_end) {
            set_timeout(r, S->c.idle_timeout);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        serve_sched_lock(S->sched);
        collect(r);
        serve_sched_unlock(S->sched);
        if (r->sse.length || r->sse_end)
            continue;
        if (peer_gone(r)) {
            r->status = 499;
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        serve_sched_wait(S->sched, r->job, &r->seen, POLL_MS);
        if (serve_now() - r->last_event > SSE_KEEPALIVE) {
            static const char ping[] = ": keep-alive\n\n";
            if (tmm_bytes_append(&r->sse, ping, sizeof ping - 1) != TMM_OK)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static enum MHD_Result start_stream(conn_req *r)
{
    const uint32_t n = r->job->n_seqs;
    r->sent_text = calloc(n, sizeof *r->sent_text);
    r->sent_entries = calloc(n, sizeof *r->sent_entries);
    r->sent_finish = calloc(n, sizeof *r->sent_finish);
    if (!r->sent_text || !r->sent_entries || !r->sent_finish)
        return MHD_NO;
    r->last_event = serve_now();
    struct MHD_Response *res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, r, NULL);
    if (!res)
        return MHD_NO;
    MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(res, "X-Accel-Buffering", "no");
    set_timeout(r, 0);
    r->status = 200;
    const enum MHD_Result ok = MHD_queue_response(r->conn, MHD_HTTP_OK, res);
    MHD_destroy_response(res);
    return ok;
}

static enum MHD_Result generate(conn_req *r, serve_kind kind)
{
    tmm_server *S = r->S;
    serve_request q;
    serve_error e;
    if (!serve_request_parse(kind, r->body.data ? r->body.data : "", r->body.length, S->info->config.vocab, &q, &e))
        return send_error(r, &e);
    if (strcmp(q.model, S->model) != 0) {
        serve_err(&e, 404, "invalid_request_error", "model_not_found", "model",
                  "The model '%.100s' does not exist; this server serves '%.100s' (GET /v1/models).", q.model,
                  S->model);
        serve_request_free(&q);
        return send_error(r, &e);
    }
    const bool ok = make_job(S, &q, &r->job, &r->prompt_tokens, &e);
    r->stream = q.stream;
    r->reply = (serve_reply){ .kind = kind, .created = (long long)time(NULL), .model = S->model, .gen = S->gen,
                              .logprobs = q.logprobs, .include_usage = q.include_usage };
    snprintf(r->reply.id, sizeof r->reply.id, "%s-%016llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)fresh(S));
    serve_request_free(&q);
    if (!ok)
        return send_error(r, &e);
    const serve_submit_result sub = serve_sched_submit(S->sched, r->job);
    if (sub == SERVE_TOO_BIG) {
        serve_bad(&e, "n", "This request needs %u sequences (prompts x n); this server holds at most %u at once "
                  "(%u slots + a queue of %u: tmm serve --slots, --queue).", r->job->n_seqs, S->info->batch + S->c.queue,
                  S->info->batch, S->c.queue);
        return send_error(r, &e);
    }
    if (sub != SERVE_SUBMITTED) {
        char retry[16];
        snprintf(retry, sizeof retry, "%u", serve_sched_retry_after(S->sched));
        const char *const headers[] = { MHD_HTTP_HEADER_RETRY_AFTER, retry, NULL };
        if (sub == SERVE_DRAINING)
            serve_err(&e, 503, "server_error", "server_shutting_down", NULL, "The server is shutting down.");
        else
            serve_err(&e, 503, "server_error", "server_overloaded", NULL, "The server is overloaded: %u sequences "
                      "are waiting for a slot (tmm serve --queue). Retry after %s s.", S->c.queue, retry);
        return send_error_h(r, &e, headers);
    }
    pthread_mutex_lock(&S->lock);
    S->in_flight++;
    pthread_mutex_unlock(&S->lock);
    r->counted = true;
    serve_metrics_in_flight(&S->metrics, 1);
    return r->stream ? start_stream(r) : answer(r);
}

/* ---- routing ----------------------------------------------------------------------------------- */

static enum MHD_Result route(conn_req *r)
{
    tmm_server *S = r->S;
    serve_error e;
    const bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    const bool post = strcmp(r->method, "POST") == 0;
    const bool generating = r->ep == SERVE_EP_COMPLETIONS || r->ep == SERVE_EP_CHAT;
    if (r->ep == SERVE_EP_OTHER) {
        serve_err(&e, 404, "invalid_request_error", "unknown_url", NULL, "Invalid URL (%s %s)", r->method, r->path);
        return send_error(r, &e);
    }
    if (generating ? !post : !get) {
        const char *const headers[] = { MHD_HTTP_HEADER_ALLOW, generating ? "POST" : "GET, HEAD", NULL };
        serve_err(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %s; use %s.",
                  r->method, r->path, generating ? "POST" : "GET");
        return send_error_h(r, &e, headers);
    }
    if (r->ep != SERVE_EP_HEALTH && !authorized(S, r->conn)) {
        const char *const headers[] = { MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", NULL };
        const bool given = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        serve_err(&e, 401, "invalid_request_error", "invalid_api_key", NULL, "%s",
                  given ? "Incorrect API key provided. Give the key that tmm serve was started with (--api-key) "
                          "as 'Authorization: Bearer KEY'."
                        : "You didn't provide an API key. Give it as 'Authorization: Bearer KEY' (tmm serve "
                          "--api-key).");
        return send_error_h(r, &e, headers);
    }
    if (r->too_large) {
        serve_err(&e, 413, "invalid_request_error", "request_too_large", NULL,
                  "The request body is larger than this server's limit of %llu bytes (tmm serve --max-body).",
                  (unsigned long long)S->c.max_body);
        return send_error(r, &e);
    }
    switch (r->ep) {
    case SERVE_EP_HEALTH: return health(r);
    case SERVE_EP_METRICS: return metrics(r);
    case SERVE_EP_MODELS:
        return models(r, strncmp(r->path, "/v1/models/", 11) == 0 ? r->path + 11 : NULL);
    case SERVE_EP_COMPLETIONS: return generate(r, SERVE_COMPLETION);
    case SERVE_EP_CHAT: return generate(r, SERVE_CHAT);
    default: return MHD_NO;
    }
}

static serve_endpoint endpoint_of(const char *url)
{
    if (strcmp(url, "/v1/completions") == 0)
        return SERVE_EP_COMPLETIONS;
    if (strcmp(url, "/v1/chat/completions") == 0)
        return SERVE_EP_CHAT;
    if (strcmp(url, "/v1/models") == 0 || (strncmp(url, "/v1/models/", 11) == 0 && url[11]))
        return SERVE_EP_MODELS;
    if (strcmp(url, "/health") == 0)
        return SERVE_EP_HEALTH;
    if (strcmp(url, "/metrics") == 0)
        return SERVE_EP_METRICS;
    return SERVE_EP_OTHER;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    tmm_server *S = cls;
    conn_req *r = *con_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        *con_cls = r;
        r->S = S, r->conn = conn, r->t0 = serve_now(), r->ep = endpoint_of(url);
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        /* a body announced larger than the limit is refused before it is read */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > S->c.max_body) {
            r->too_large = true;
            serve_error e;
            serve_err(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "The request body is larger than this server's limit of %llu bytes (tmm serve --max-body).",
                      (unsigned long long)S->c.max_body);
            return send_error(r, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_large && r->body.length + *upload_size <= S->c.max_body) {
            if (tmm_bytes_append(&r->body, upload, *upload_size) != TMM_OK)
                return MHD_NO;
        } else {
            r->too_large = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->status) /* answered already (413 before the body) */
        return MHD_YES;
    return route(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    tmm_server *S = cls;
    conn_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    if (r->job) {
        serve_sched_cancel(S->sched, r->job); /* nothing left to stop when it finished */
        serve_job_free(r->job);
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->status == 200)
        r->status = 499; /* the client went away before the whole answer */
    serve_metrics_request(&S->metrics, r->ep, r->status);
    if (S->c.log)
        fprintf(stderr, "tmm serve: %s %s %d %.3f s\n", r->method, r->path, r->status, serve_now() - r->t0);
    if (r->counted) {
        serve_metrics_in_flight(&S->metrics, -1);
        pthread_mutex_lock(&S->lock);
        S->in_flight--;
        pthread_mutex_unlock(&S->lock);
    }
    free(r->body.data), free(r->sse.data), free(r->sent_text), free(r->sent_entries), free(r->sent_finish);
    free(r);
}

static void on_log(void *cls, const char *fmt, va_list ap) TMM_PRINTF(2, 0);
static void on_log(void *cls, const char *fmt, va_list ap)
{
    const tmm_server *S = cls;
    if (!S->c.log)
        return;
    char line[400];
    vsnprintf(line, sizeof line, fmt, ap);
    const size_t n = strlen(line);
    fprintf(stderr, "tmm serve: libmicrohttpd: %s%s", line, n && line[n - 1] == '\n' ? "" : "\n");
}

/* ---- the server ------------------------------------------------------------------------------- */

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }

static void server_free(tmm_server *S)
{
    if (S->sched)
        serve_sched_destroy(S->sched);
    serve_metrics_destroy(&S->metrics);
    pthread_mutex_destroy(&S->lock);
    free(S->host), free(S->api_key), free(S->model);
    free(S);
}

tmm_status tmm_server_start(tmm_generator *gen, const tmm_serve_config *c, tmm_server **out)
{
    *out = NULL;
    tmm_server *S = calloc(1, sizeof *S);
    if (!S)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    S->c = *c;
    S->host = dup_str(c->host), S->api_key = dup_str(c->api_key), S->model = dup_str(c->model);
    S->gen = gen, S->info = tmm_generator_get_info(gen);
    S->created = (long long)time(NULL);
    S->quiesced = MHD_INVALID_SOCKET;
    pthread_mutex_init(&S->lock, NULL);
    serve_metrics_init(&S->metrics, S->info->batch);
    tmm_status rc = S->host && S->model && (S->api_key || !c->api_key)
                        ? TMM_OK
                        : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (rc == TMM_OK)
        rc = serve_sched_create(gen, &S->metrics, c->queue, &S->sched);
    struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%u", c->port);
    int gai = rc == TMM_OK ? getaddrinfo(S->host, port, &hints, &ai) : 0;
    if (rc == TMM_OK && gai != 0)
        rc = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "cannot resolve the address '%s': %s", S->host, gai_strerror(gai));
    if (rc == TMM_OK) {
        const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                               MHD_USE_AUTO | MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
        S->d = MHD_start_daemon(flags, (uint16_t)c->port, NULL, NULL, on_request, S,
                                MHD_OPTION_EXTERNAL_LOGGER, on_log, S,
                                MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, S,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->idle_timeout,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)c->max_connections,
                                MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
                                MHD_OPTION_END);
        if (!S->d)
            rc = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "cannot listen on %s port %u (in use, or not an address of "
                          "this machine)", S->host, c->port);
    }
    if (ai)
        freeaddrinfo(ai);
    if (rc == TMM_OK) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(S->d, MHD_DAEMON_INFO_BIND_PORT);
        S->port = di ? di->port : (uint16_t)c->port;
    }
    if (rc != TMM_OK) {
        server_free(S);
        return rc;
    }
    *out = S;
    return TMM_OK;
}

uint16_t tmm_server_port(const tmm_server *S) { return S->port; }

void tmm_server_drain(tmm_server *S)
{
    pthread_mutex_lock(&S->lock);
    const bool first = !S->draining;
    S->draining = true;
    pthread_mutex_unlock(&S->lock);
    if (!first)
        return;
    serve_sched_drain(S->sched);
    S->quiesced = MHD_quiesce_daemon(S->d);
}

uint32_t tmm_server_in_flight(tmm_server *S)
{
    pthread_mutex_lock(&S->lock);
    const uint32_t n = S->in_flight;
    pthread_mutex_unlock(&S->lock);
    return n;
}

void tmm_server_stop(tmm_server *S)
{
    if (!S)
        return;
    /* the sequences still running end with an error, so that every handler returns */
    serve_sched_stop(S->sched);
    MHD_stop_daemon(S->d);
    if (S->quiesced != MHD_INVALID_SOCKET)
        close(S->quiesced);
    server_free(S);
}
