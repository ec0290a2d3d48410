/* The manifest of a prepared directory (manifest.json, docs/formats.md
 * "Token shards"): the tokenizer and every shard with its split, token and
 * document counts and checksum. tmm prepare writes it last, so a directory
 * without one was not completely prepared. */
#ifndef TMM_TRAIN_MANIFEST_H
#define TMM_TRAIN_MANIFEST_H

#include <stdint.h>

#include "tmm/tmm.h"
#include "train/shards.h"

typedef struct tmm_manifest_shard {
    char file[32];          /* train_NNNNNN.bin or val_NNNNNN.bin */
    uint32_t split;         /* tmm_shard_split */
    uint64_t tokens, documents, checksum;
} tmm_manifest_shard;

typedef struct tmm_manifest {
    char tokenizer_kind[16];
    uint64_t fingerprint;
    uint32_t vocab, eot;
    double val_fraction;
    uint64_t documents, skipped, input_bytes;
    tmm_manifest_shard *shards; /* malloc'ed */
    uint32_t count;
} tmm_manifest;

/* Reads dir/manifest.json, checking every field (shard names must be the
 * split's file names in order, no path). */
tmm_status tmm_manifest_read(const char *dir, tmm_manifest *out);
/* Writes dir/manifest.json atomically. */
tmm_status tmm_manifest_write(const char *dir, const tmm_manifest *m);
void tmm_manifest_free(tmm_manifest *m);

#endif
