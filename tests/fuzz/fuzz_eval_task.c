/* libFuzzer harness: the task-file readers of tmm eval --task (src/eval).
 * The first byte picks the task; the rest is the JSONL file. Reading
 * succeeds or fails with a message; on what is read, every IFEval rule is
 * checked (strict and loose) against the item's prompt, and the SQuAD
 * metrics score the prompt against the gold answers. */
#include "fuzz_util.h"

#include <string.h>

#include "eval/eval.h"
#include "eval/ifeval.h"
#include "eval/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *const *names = tmm_eval_task_names();
    size_t n = 0;
    while (names[n])
        n++;
    const tmm_eval_task *task;
    if (tmm_eval_task_find(names[data[0] % n], &task) != TMM_OK)
        abort();
    const char *path = fuzz_file(data + 1, size - 1);
    tmm_eval_set set;
    if (tmm_eval_read(task, path, &set) != TMM_OK)
        return 0;
    for (uint32_t i = 0; i < set.count; i++) {
        const tmm_eval_item *it = &set.items[i];
        for (uint32_t k = 0; k < it->n_rules; k++) {
            (void)tmm_ifeval_follows(&it->rules[k], it->context);
            (void)tmm_ifeval_follows_loose(&it->rules[k], it->context);
        }
        if (it->n_answers) {
            double em, f1;
            tmm_squad_score((const char *const *)it->answers, it->n_answers, it->context, &em, &f1);
            if (!(em >= 0 && em <= 1 && f1 >= 0 && f1 <= 1))
                abort();
        }
        if (!it->skip && tmm_eval_task_kind(task) == TMM_EVAL_CHOICE && it->gold >= it->n_choices)
            abort();
    }
    tmm_eval_set_free(&set);
    return 0;
}
