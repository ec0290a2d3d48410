/* tmm serve: the OpenAI API over HTTP for one checkpoint (src/serve, docs/serve.md). */
#define _POSIX_C_SOURCE 200809L /* sigwait, sigtimedwait, pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gen/generator.h"
#include "model/checkpoint.h"
#include "serve/serve.h"

static void usage(void)
{
    printf("usage: tmm serve --checkpoint RUN [--host 127.0.0.1] [--port 8080] [--slots N] [--api-key KEY]\n"
           "                 [--max-tokens N] [--queue N] [--model-name NAME] [--max-body BYTES]\n"
           "                 [--idle-timeout S] [--max-connections N] [--exact] [--device N] [--quiet]\n\n"
           "Serves a checkpoint over HTTP with OpenAI's API: POST /v1/completions and\n"
           "/v1/chat/completions (streaming with server-sent events), GET /v1/models, /health\n"
           "and /metrics (Prometheus). The model is loaded once; concurrent requests share its\n"
           "batch slots (continuous batching: a new request's prompt is read in while the others\n"
           "keep decoding, and a finished one frees its slot at once). A request with a seed\n"
           "returns the same tokens alone or beside others. A distilled checkpoint decodes\n"
           "through its state-space realizations. SIGTERM or Ctrl-C stops listening, finishes the\n"
           "requests in flight and exits (a second one stops at once). See docs/serve.md.\n\n"
           "  --checkpoint RUN       run directory, checkpoint directory or model file\n"
           "  --host ADDR            address to listen on (default 127.0.0.1: this machine only;\n"
           "                         0.0.0.0 or :: for every interface, then give --api-key)\n"
           "  --port N               TCP port (default 8080; 0: any free port, printed at start)\n"
           "  --slots N              sequences decoded together (default 4)\n"
           "  --api-key KEY          require 'Authorization: Bearer KEY' (else 401); /health stays\n"
           "                         open. $TMM_API_KEY is read when the flag is not given\n"
           "  --max-tokens N         the most tokens one request may ask for (default: the model's\n"
           "                         context); also chat's default\n"
           "  --queue N              sequences that may wait for a free slot (default 64); past it\n"
           "                         requests get 503 with Retry-After\n"
           "  --model-name NAME      the model's id in the API (default: the checkpoint's directory name)\n"
           "  --max-body BYTES       largest request body (default 1048576; larger: 413)\n"
           "  --idle-timeout S       close a connection idle for S seconds (default 30; 0: never)\n"
           "  --max-connections N    open connections at most (default 256)\n"
           "  --exact                a distilled checkpoint decodes exactly (the cached dot product);\n"
           "                         refused for one that is not distilled (it always does)\n"
           "  --device N             Vulkan device (see tmm devices)\n"
           "  -q, --quiet            no line per request on stderr\n");
}

enum { O_CKPT = 256, O_HOST, O_PORT, O_SLOTS, O_KEY, O_MAXTOK, O_QUEUE, O_NAME, O_BODY, O_IDLE, O_CONN, O_EXACT,
       O_DEVICE };

static const struct option longopts[] = {
    { "checkpoint", required_argument, NULL, O_CKPT }, { "host", required_argument, NULL, O_HOST },
    { "port", required_argument, NULL, O_PORT },       { "slots", required_argument, NULL, O_SLOTS },
    { "api-key", required_argument, NULL, O_KEY },     { "max-tokens", required_argument, NULL, O_MAXTOK },
    { "queue", required_argument, NULL, O_QUEUE },     { "model-name", required_argument, NULL, O_NAME },
    { "max-body", required_argument, NULL, O_BODY },   { "idle-timeout", required_argument, NULL, O_IDLE },
    { "max-connections", required_argument, NULL, O_CONN }, { "exact", no_argument, NULL, O_EXACT },
    { "device", required_argument, NULL, O_DEVICE },   { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },                { 0, 0, 0, 0 },
};

typedef struct options {
    tmm_serve_config c;
    const char *checkpoint;
    uint32_t slots;
    bool max_tokens_given;
    unsigned load_flags;
    int device;
} options;

/* 0: parsed; -1 after --help; else the exit status */
static int parse(int argc, char **argv, options *o)
{
    unsigned long v;
    int opt;
    cli_args args = { .longopts = longopts, .shortopts = "qh" };
    while ((opt = cli_getopt(&args, argc, argv)) != -1) {
        bool ok = true;
        switch (opt) {
        case O_CKPT: o->checkpoint = optarg; break;
        case O_HOST: o->c.host = optarg; break;
        case O_PORT:
            ok = cli_parse_uint("--port", optarg, 65535, &v);
            o->c.port = (uint32_t)v;
            break;
        case O_SLOTS: ok = cli_parse_positive("--slots", optarg, 1024, &o->slots); break;
        case O_KEY: o->c.api_key = optarg; break;
        case O_MAXTOK:
            ok = cli_parse_positive("--max-tokens", optarg, UINT32_MAX, &o->c.max_tokens);
            o->max_tokens_given = true;
            break;
        case O_QUEUE:
            ok = cli_parse_uint("--queue", optarg, 1u << 20, &v);
            o->c.queue = (uint32_t)v;
            break;
        case O_NAME: o->c.model = optarg; break;
        case O_BODY:
            ok = cli_parse_uint("--max-body", optarg, 1ul << 30, &v);
            o->c.max_body = v;
            break;
        case O_IDLE:
            ok = cli_parse_uint("--idle-timeout", optarg, 86400, &v);
            o->c.idle_timeout = (uint32_t)v;
            break;
        case O_CONN: ok = cli_parse_positive("--max-connections", optarg, 65536, &o->c.max_connections); break;
        case O_EXACT: o->load_flags |= TMM_LOAD_EXACT; break;
        case O_DEVICE:
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            o->device = (int)v;
            break;
        case 'q': o->c.log = false; break;
        case 'h': usage(); return -1;
        default: return 2;
        }
        if (!ok)
            return 2;
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm serve --help'\n", argv[optind]);
        return 2;
    }
    if (!o->checkpoint) {
        cli_fail("--checkpoint RUN is required (a run directory from tmm train)\n");
        return 2;
    }
    if (o->c.max_body < 64) {
        cli_fail("--max-body must be at least 64 bytes, got %llu\n", (unsigned long long)o->c.max_body);
        return 2;
    }
    if (!o->c.api_key && getenv("TMM_API_KEY") && *getenv("TMM_API_KEY"))
        o->c.api_key = getenv("TMM_API_KEY");
    if (o->c.api_key && !*o->c.api_key) {
        cli_fail("--api-key must not be empty\n");
        return 2;
    }
    return 0;
}

/* The last component of the checkpoint's path: the run's name. */
static void default_name(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    snprintf(buf, size, "%.*s", (int)(n - b), path + b);
    if (!buf[0])
        snprintf(buf, size, "tmm");
}

int cmd_serve(int argc, char **argv)
{
    options o = { .c = { .host = "127.0.0.1", .port = 8080, .queue = 64, .max_body = 1u << 20, .idle_timeout = 30,
                         .max_connections = 256, .log = true },
                  .slots = 4, .device = -1 };
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    /* every thread made from here on (the device's, the server's) leaves these to sigwait below */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    char name[256];
    default_name(o.checkpoint, name, sizeof name);
    if (!o.c.model)
        o.c.model = name;
    tmm_device *dev = NULL;
    if ((rc = cli_open_device(o.device, &dev)) != 0)
        return rc;
    tmm_generator *gen = NULL;
    tmm_server *server = NULL;
    tmm_status s = tmm_gen_load(dev, o.checkpoint, o.slots, TMM_TOEPLITZ_AUTO, o.load_flags, &gen);
    if (s != TMM_OK) {
        rc = cli_error("cannot load the checkpoint", s);
    } else {
        const tmm_generator_info *info = tmm_generator_get_info(gen);
        if (!o.max_tokens_given)
            o.c.max_tokens = info->config.n_ctx;
        s = tmm_server_start(gen, &o.c, &server);
        if (s != TMM_OK)
            rc = cli_error("cannot start the server", s);
    }
    if (rc == 0) {
        const tmm_generator_info *info = tmm_generator_get_info(gen);
        const bool v6 = strchr(o.c.host, ':') != NULL;
        printf("tmm serve: listening on http://%s%s%s:%u (model '%s': %s, context %u, %u slots%s%s)\n", v6 ? "[" : "",
               o.c.host, v6 ? "]" : "", tmm_server_port(server), o.c.model, tmm_arch_name(info->config.arch),
               info->config.n_ctx, info->batch, info->distilled ? ", distilled decoding" : "",
               o.c.api_key ? ", API key required" : "");
        if (!o.c.api_key && strcmp(o.c.host, "127.0.0.1") != 0 && strcmp(o.c.host, "::1") != 0 &&
            strcmp(o.c.host, "localhost") != 0)
            fprintf(stderr, "tmm serve: warning: listening on %s without an API key: anyone who reaches this "
                    "port can use the model (give --api-key or $TMM_API_KEY)\n", o.c.host);
        fflush(stdout);
        int sig = 0;
        sigwait(&stop, &sig);
        fprintf(stderr, "tmm serve: %s: no new requests; finishing the %u in flight (again to stop at once)\n",
                sig == SIGINT ? "interrupted" : "terminated", tmm_server_in_flight(server));
        tmm_server_drain(server);
        const struct timespec tick = { 0, 100 * 1000 * 1000 };
        while (tmm_server_in_flight(server) > 0)
            if (sigtimedwait(&stop, NULL, &tick) > 0) {
                fprintf(stderr, "tmm serve: stopping now: %u requests end with an error\n",
                        tmm_server_in_flight(server));
                rc = 1;
                break;
            }
    }
    tmm_server_stop(server);
    tmm_generator_destroy(gen);
    tmm_device_destroy(dev);
    return rc;
}
