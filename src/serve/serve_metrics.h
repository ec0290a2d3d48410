/* The server's counters for GET /metrics, in Prometheus' text format
 * (docs/serve.md "Metrics"): requests by endpoint and status, tokens in and
 * out, the queue and the slots, time to first token and between tokens
 * (histograms), decode steps and the tokens per second of the last 10 s.
 * Thread-safe: every call takes the metrics' own lock. */
#ifndef TMM_SERVE_METRICS_H
#define TMM_SERVE_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "status.h"
#include "text/tokenizer.h" /* tmm_bytes */

#define SERVE_HIST_BUCKETS 14
#define SERVE_RATE_WINDOW 10 /* seconds over which tokens_per_second is measured */
#define SERVE_ENDPOINTS 7
#define SERVE_CODES 10

typedef struct serve_hist {
    uint64_t count[SERVE_HIST_BUCKETS + 1]; /* + the +Inf bucket */
    double sum;
    uint64_t n;
} serve_hist;

typedef struct serve_metrics {
    pthread_mutex_t lock;
    double start;                                 /* seconds, monotonic */
    uint64_t requests[SERVE_ENDPOINTS][SERVE_CODES];
    uint64_t prompt_tokens, generated_tokens, steps, prefills, cancelled;
    double step_seconds, prefill_seconds;
    serve_hist ttft, itl, e2e;
    uint64_t rate[SERVE_RATE_WINDOW];             /* tokens generated per second, ring */
    int64_t rate_second;                          /* the second rate's newest entry counts */
    /* gauges, set by the scheduler */
    uint32_t queue_depth, slots_busy, slots_total, in_flight;
} serve_metrics;

/* The endpoints counted (index for serve_metrics_request). */
typedef enum serve_endpoint {
    SERVE_EP_COMPLETIONS, SERVE_EP_CHAT, SERVE_EP_MODELS, SERVE_EP_HEALTH, SERVE_EP_METRICS, SERVE_EP_OTHER,
    SERVE_EP_NONE
} serve_endpoint;

/* Seconds on the monotonic clock. */
double serve_now(void);

void serve_metrics_init(serve_metrics *m, uint32_t slots);
void serve_metrics_destroy(serve_metrics *m);
void serve_metrics_request(serve_metrics *m, serve_endpoint ep, int status);
/* A sequence's first token came `ttft` seconds after its request was queued. */
void serve_metrics_first_token(serve_metrics *m, double ttft);
/* A sequence finished after `e2e` seconds. */
void serve_metrics_finished(serve_metrics *m, double e2e, bool cancelled);
/* One decode step of `seconds` made `tokens` new tokens. */
void serve_metrics_step(serve_metrics *m, double seconds, uint32_t tokens, double now);
/* One prompt's prefill of `seconds` made `tokens` (its first, or none). */
void serve_metrics_prefill(serve_metrics *m, double seconds, uint32_t tokens, double now);
void serve_metrics_itl(serve_metrics *m, double seconds);
void serve_metrics_gauges(serve_metrics *m, uint32_t queue_depth, uint32_t slots_busy);
void serve_metrics_in_flight(serve_metrics *m, int delta);
void serve_metrics_prompt(serve_metrics *m, uint64_t tokens);
/* The exposition text (malloc'ed into out); false when out of memory. */
bool serve_metrics_render(serve_metrics *m, const char *model, tmm_bytes *out);
/* Tokens generated per second over the last SERVE_RATE_WINDOW seconds. */
double serve_metrics_rate(serve_metrics *m, double now);

#endif
