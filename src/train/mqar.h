/* Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"): rows
 * of key-value pairs followed by queries of some of the keys, scored only on
 * the value after each query key. The layout and the streams are specified
 * in docs/data.md ("The MQAR task"); data.c dispatches here. Every function is
 * pure: rows are functions of (config, stream key, sample index, n). */
#ifndef TMM_TRAIN_MQAR_H
#define TMM_TRAIN_MQAR_H

#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"

#define TMM_MQAR_DEFAULT_PAIRS 8u
#define TMM_MQAR_DEFAULT_KEYS 32u
#define TMM_MQAR_DEFAULT_VALUES 32u
#define TMM_MQAR_MAX_SYMBOLS 65536u /* keys, values and pairs each */
#define TMM_MQAR_FILLER 0u          /* the unscored token after the queries */

typedef struct tmm_mqar_config {
    uint32_t pairs;   /* key-value pairs per row: 1 .. keys (keys are distinct within a row) */
    uint32_t queries; /* keys queried per row, each at most once: 0 (every pair) .. pairs */
    uint32_t keys;    /* key tokens: 1 .. keys */
    uint32_t values;  /* value tokens: keys + 1 .. keys + values */
} tmm_mqar_config;

/* 8 pairs, every one queried, 32 keys, 32 values (vocab 65). */
void tmm_mqar_config_init(tmm_mqar_config *config);
/* The config is valid and a row of 2 x pairs + 2 x queries tokens fits in n;
 * errors name the config keys and flags. */
tmm_status tmm_mqar_check(const tmm_mqar_config *config, uint32_t n);
/* 1 + keys + values: the filler, the keys, the values. */
uint32_t tmm_mqar_vocab(const tmm_mqar_config *config);
/* The queries of a row: config->queries, or pairs when that is 0. */
uint32_t tmm_mqar_queries(const tmm_mqar_config *config);
/* One line for the trainer's printout. */
void tmm_mqar_describe(const tmm_mqar_config *config, uint32_t n, uint64_t seed, char *buf, size_t size);
/* Rows j0 .. j0 + batch - 1 of the stream (a tmm_rng_key), each of n tokens,
 * into tokens [batch, n] and (when not NULL) targets [batch, n]. Checks the
 * config against n first. */
tmm_status tmm_mqar_rows(const tmm_mqar_config *config, uint64_t stream, uint64_t j0, uint32_t batch, uint32_t n,
                         uint32_t *tokens, int32_t *targets);

#endif
