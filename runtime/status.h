/* Errors as values: helpers that set the thread's error message and return a
 * status, and the mapping from VkResult. */
#ifndef TMM_RT_STATUS_H
#define TMM_RT_STATUS_H

#include <vulkan/vulkan.h>

#include "tmm/tmm.h"

#if defined(__GNUC__)
#define TMM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TMM_PRINTF(a, b)
#endif

/* Records "message" as this thread's last error and returns status. */
tmm_status tmm_fail(tmm_status status, const char *fmt, ...) TMM_PRINTF(2, 3);
/* Maps a failed VkResult to a status, with "what" naming the failed call. */
tmm_status tmm_vk_fail(VkResult result, const char *what);
const char *tmm_vk_result_name(VkResult result);
/* Prints "tmm: warning: ..." on stderr. */
void tmm_warn(const char *fmt, ...) TMM_PRINTF(1, 2);

/* Return early from the calling function when a status is not TMM_OK. */
#define TMM_TRY(expr)                      \
    do {                                   \
        tmm_status tmm_try_s_ = (expr);    \
        if (tmm_try_s_ != TMM_OK)          \
            return tmm_try_s_;             \
    } while (0)

#define TMM_VK_TRY(call)                        \
    do {                                        \
        VkResult tmm_vk_r_ = (call);            \
        if (tmm_vk_r_ != VK_SUCCESS)            \
            return tmm_vk_fail(tmm_vk_r_, #call); \
    } while (0)

#endif
