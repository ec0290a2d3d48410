/* The Prometheus counters (serve_metrics.h). */
#include "serve/serve_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const double bounds[SERVE_HIST_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30 };
static const char *const endpoints[SERVE_ENDPOINTS] = {
    "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "other", "none",
};
static const int codes[SERVE_CODES] = { 200, 400, 401, 404, 405, 413, 499, 500, 503, 0 };

double serve_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

void serve_metrics_init(serve_metrics *m, uint32_t slots)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->start = serve_now();
    m->slots_total = slots;
    m->rate_second = (int64_t)m->start;
}

void serve_metrics_destroy(serve_metrics *m) { pthread_mutex_destroy(&m->lock); }

static void observe(serve_hist *h, double v)
{
    int i = 0;
    while (i < SERVE_HIST_BUCKETS && v > bounds[i])
        i++;
    h->count[i]++;
    h->sum += v;
    h->n++;
}

void serve_metrics_request(serve_metrics *m, serve_endpoint ep, int status)
{
    int c = SERVE_CODES - 1; /* any other status */
    for (int i = 0; i < SERVE_CODES - 1; i++)
        if (codes[i] == status)
            c = i;
    pthread_mutex_lock(&m->lock);
    m->requests[ep][c]++;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_first_token(serve_metrics *m, double ttft)
{
    pthread_mutex_lock(&m->lock);
    observe(&m->ttft, ttft);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_itl(serve_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->lock);
    observe(&m->itl, seconds);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_finished(serve_metrics *m, double e2e, bool cancelled)
{
    pthread_mutex_lock(&m->lock);
    observe(&m->e2e, e2e);
    m->cancelled += cancelled;
    pthread_mutex_unlock(&m->lock);
}

/* Moves the rate ring forward to the second of `now` (lock held). */
static void rate_advance(serve_metrics *m, double now)
{
    const int64_t s = (int64_t)now;
    if (s - m->rate_second >= SERVE_RATE_WINDOW)
        memset(m->rate, 0, sizeof m->rate);
    else
        for (int64_t t = m->rate_second + 1; t <= s; t++)
            m->rate[t % SERVE_RATE_WINDOW] = 0;
    if (s > m->rate_second)
        m->rate_second = s;
}

/* Counts tokens generated now (lock held). */
static void generated(serve_metrics *m, uint32_t tokens, double now)
{
    m->generated_tokens += tokens;
    rate_advance(m, now);
    m->rate[m->rate_second % SERVE_RATE_WINDOW] += tokens;
}

void serve_metrics_step(serve_metrics *m, double seconds, uint32_t tokens, double now)
{
    pthread_mutex_lock(&m->lock);
    m->steps++;
    m->step_seconds += seconds;
    generated(m, tokens, now);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_prefill(serve_metrics *m, double seconds, uint32_t tokens, double now)
{
    pthread_mutex_lock(&m->lock);
    m->prefills++;
    m->prefill_seconds += seconds;
    generated(m, tokens, now);
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_prompt(serve_metrics *m, uint64_t tokens)
{
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += tokens;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_gauges(serve_metrics *m, uint32_t queue_depth, uint32_t slots_busy)
{
    pthread_mutex_lock(&m->lock);
    m->queue_depth = queue_depth, m->slots_busy = slots_busy;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_in_flight(serve_metrics *m, int delta)
{
    pthread_mutex_lock(&m->lock);
    m->in_flight = (uint32_t)((int)m->in_flight + delta);
    pthread_mutex_unlock(&m->lock);
}

/* lock held */
static double rate_locked(serve_metrics *m, double now)
{
    rate_advance(m, now);
    uint64_t total = 0;
    for (int i = 0; i < SERVE_RATE_WINDOW; i++)
        total += m->rate[i];
    const double span = now - m->start < SERVE_RATE_WINDOW ? now - m->start : SERVE_RATE_WINDOW;
    return span > 0 ? (double)total / span : 0.0;
}

double serve_metrics_rate(serve_metrics *m, double now)
{
    pthread_mutex_lock(&m->lock);
    const double r = rate_locked(m, now);
    pthread_mutex_unlock(&m->lock);
    return r;
}

static bool out_printf(tmm_bytes *b, const char *fmt, ...) TMM_PRINTF(2, 3);
static bool out_printf(tmm_bytes *b, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < sizeof buf && tmm_bytes_append(b, buf, (size_t)n) == TMM_OK;
}

static bool hist(tmm_bytes *b, const char *name, const char *help, const serve_hist *h)
{
    bool ok = out_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SERVE_HIST_BUCKETS; i++) {
        cum += h->count[i];
        ok = ok && out_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
    }
    cum += h->count[SERVE_HIST_BUCKETS];
    return ok && out_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                            (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->n);
}

static bool one(tmm_bytes *b, const char *name, const char *type, const char *help, double v)
{
    return out_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

bool serve_metrics_render(serve_metrics *m, const char *model, tmm_bytes *b)
{
    pthread_mutex_lock(&m->lock);
    const double now = serve_now();
    bool ok = out_printf(b, "# HELP tmm_requests_total HTTP requests answered, by endpoint and status code.\n"
                            "# TYPE tmm_requests_total counter\n");
    for (int e = 0; e < SERVE_ENDPOINTS - 1; e++)
        for (int c = 0; c < SERVE_CODES; c++)
            if (m->requests[e][c])
                ok = ok && out_printf(b, "tmm_requests_total{endpoint=\"%s\",code=\"%d\"} %llu\n", endpoints[e],
                                      codes[c], (unsigned long long)m->requests[e][c]);
    ok = ok && one(b, "tmm_prompt_tokens_total", "counter", "Prompt tokens of the requests admitted.",
                   (double)m->prompt_tokens);
    ok = ok && one(b, "tmm_generation_tokens_total", "counter", "Tokens generated.", (double)m->generated_tokens);
    ok = ok && one(b, "tmm_decode_steps_total", "counter", "Decode steps run (every busy slot advances by one).",
                   (double)m->steps);
    ok = ok && one(b, "tmm_decode_step_seconds_total", "counter", "Seconds spent in decode steps.", m->step_seconds);
    ok = ok && one(b, "tmm_prefills_total", "counter", "Prompts prefilled (each in one pass into its slot).",
                   (double)m->prefills);
    ok = ok && one(b, "tmm_prefill_seconds_total", "counter", "Seconds spent in prefills.", m->prefill_seconds);
    ok = ok && one(b, "tmm_cancelled_sequences_total", "counter",
                   "Sequences stopped early because their client went away.", (double)m->cancelled);
    ok = ok && one(b, "tmm_queue_depth", "gauge", "Sequences waiting for a slot.", m->queue_depth);
    ok = ok && one(b, "tmm_slots_busy", "gauge", "Batch slots decoding a sequence.", m->slots_busy);
    ok = ok && one(b, "tmm_slots_total", "gauge", "Batch slots of the generator (--slots).", m->slots_total);
    ok = ok && one(b, "tmm_requests_in_flight", "gauge", "Generation requests being answered.", m->in_flight);
    ok = ok && one(b, "tmm_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.",
                   rate_locked(m, now));
    ok = ok && hist(b, "tmm_time_to_first_token_seconds", "From a request's arrival to its first token.", &m->ttft);
    ok = ok && hist(b, "tmm_time_per_output_token_seconds", "Between consecutive tokens of a sequence.", &m->itl);
    ok = ok && hist(b, "tmm_request_duration_seconds", "From a sequence's arrival to its last token.", &m->e2e);
    ok = ok && one(b, "tmm_uptime_seconds", "gauge", "Seconds since the server started.", now - m->start);
    /* a label value escapes \\, " and newlines */
    char label[256];
    size_t k = 0;
    for (const char *p = model; *p && k + 2 < sizeof label; p++) {
        if (*p == '\\' || *p == '"' || *p == '\n')
            label[k++] = '\\';
        label[k++] = *p == '\n' ? 'n' : *p;
    }
    label[k] = 0;
    ok = ok && out_printf(b, "# HELP tmm_model_info The model served.\n# TYPE tmm_model_info gauge\n"
                             "tmm_model_info{model=\"%s\"} 1\n", label);
    pthread_mutex_unlock(&m->lock);
    return ok;
}
