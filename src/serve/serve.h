/* tmm serve: an HTTP server of the OpenAI API over one generator
 * (docs/serve.md). The server's threads: libmicrohttpd's listener and one
 * thread per connection, which parse, wait and answer; and the scheduler
 * (serve_sched.h), which alone runs the generator. Layers: serve.h (this),
 * serve_http.c (routes, authentication, limits, responses and streams),
 * serve_request.c (parsing the bodies), serve_json.c / serve_jw.c (writing
 * the responses), serve_sched.c (continuous batching), serve_text.c (stop
 * sequences), serve_metrics.c (Prometheus). */
#ifndef TMM_SERVE_SERVE_H
#define TMM_SERVE_SERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "tmm/generate.h"

typedef struct tmm_serve_config {
    const char *host;          /* address to bind: a numeric IPv4 or IPv6 address or a name */
    uint32_t port;             /* 0: any free port (tmm_server_port says which) */
    const char *api_key;       /* NULL: no authentication */
    const char *model;         /* the model's id in the API */
    uint32_t max_tokens;       /* the most tokens one request may ask for; chat's default */
    uint32_t queue;            /* sequences that may wait for a slot; then 503 */
    uint64_t max_body;         /* bytes of a request body; then 413 */
    uint32_t idle_timeout;     /* seconds a connection may idle (0: forever) */
    uint32_t max_connections;
    bool log;                  /* one line per request on stderr */
} tmm_serve_config;

typedef struct tmm_server tmm_server;

/* Starts serving gen (whose batch is the slot count), which must outlive
 * the server. Fails for an address that cannot be bound, or a model whose
 * decoder cannot restart one sequence at a time (tmm_gen_restart). */
tmm_status tmm_server_start(tmm_generator *gen, const tmm_serve_config *c, tmm_server **out);
uint16_t tmm_server_port(const tmm_server *s);
/* Stops listening and refuses new requests (503); those in flight go on. */
void tmm_server_drain(tmm_server *s);
/* Generation requests not yet answered in full. */
uint32_t tmm_server_in_flight(tmm_server *s);
/* Ends what is still running (its clients get an error), closes every
 * connection and frees the server. */
void tmm_server_stop(tmm_server *s);

#endif
