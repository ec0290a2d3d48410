#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_error(const char *what, tmm_status status)
{
    const char *msg = tmm_last_error();
    fprintf(stderr, "tmm: %s: %s\n", what, *msg ? msg : tmm_status_name(status));
    return 1;
}

bool cli_parse_uint(const char *option, const char *text, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v > max) {
        fprintf(stderr, "tmm: %s expects a whole number from 0 to %lu, got '%s'\n", option, max, text);
        return false;
    }
    *out = v;
    return true;
}

int cli_open_device(int index, tmm_device **out)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.index = index;
    tmm_status s = tmm_device_create(&opt, out);
    if (s != TMM_OK)
        return cli_error("cannot open a Vulkan device", s);
    return 0;
}
