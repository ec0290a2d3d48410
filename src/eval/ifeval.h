/* IFEval's verifiable instructions (Zhou et al. 2023, the instructions_registry
 * of google-research/instruction_following_eval): the rule families tmm
 * checks, each as the reference's check_following (docs/eval.md "IFEval"). */
#ifndef TMM_EVAL_IFEVAL_H
#define TMM_EVAL_IFEVAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "eval/eval.h"

/* The instruction ids tmm checks, NULL-terminated. */
const char *const *tmm_ifeval_rule_names(void);
/* One instruction from its id and its kwargs object (keys the rule does not
 * use, and null values, are ignored, as the HF export has them all). 0: ok;
 * 1: an instruction tmm does not check (msg: the reason the item is skipped);
 * -1: bad arguments (msg says which). The rule is freeable either way. */
int tmm_ifeval_rule_parse(const char *id, const cJSON *kwargs, tmm_ifeval_rule *rule, char *msg, size_t size);
void tmm_ifeval_rule_free(tmm_ifeval_rule *rule);
/* Strict: the response (non-blank) follows the instruction. Loose: one of
 * IFEval's 8 variants of it does (first line, last line or both removed, and
 * each with every '*' removed). */
bool tmm_ifeval_follows(const tmm_ifeval_rule *rule, const char *response);
bool tmm_ifeval_follows_loose(const tmm_ifeval_rule *rule, const char *response);

#endif
