/* The largest file tmm reads for each kind of input (tmm_read_file refuses
 * larger ones with a message naming the limit; docs/guide/reliability.md
 * lists them). Every file is read whole into memory, so these also bound memory. */
#ifndef TMM_IO_LIMITS_H
#define TMM_IO_LIMITS_H

#define TMM_LIMIT_CONFIG (1ull << 20)        /* --config JSON */
#define TMM_LIMIT_POINTER 4096ull            /* checkpoints/latest */
#define TMM_LIMIT_CHECKPOINT (32ull << 30)   /* model.safetensors, train_state.safetensors */
#define TMM_LIMIT_TEXT (16ull << 30)         /* one --data text or JSONL file */
#define TMM_LIMIT_PROMPT (64ull << 20)       /* tmm generate --prompt-file */
#define TMM_LIMIT_TOKENIZER (256ull << 20)  /* tokenizer.json */
#define TMM_LIMIT_CACHE (1ull << 30)         /* pipeline cache and mixer calibration files */
#define TMM_LIMIT_MANIFEST (64ull << 20)     /* a prepared directory's manifest.json */
#define TMM_LIMIT_METRICS (4ull << 30)       /* a run's metrics.jsonl, cut back to the checkpoint on --resume */
#define TMM_LIMIT_RESULTS (256ull << 20)    /* tmm experiment: a run's curve.jsonl, result.json, settings.json */
#define TMM_LIMIT_TASK (4ull << 30)          /* tmm eval --task: one JSONL task file */

#endif
