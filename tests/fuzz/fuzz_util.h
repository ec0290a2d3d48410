/* Shared by the libFuzzer harnesses: the input as a file tmm can open by
 * path. A memfd (an anonymous regular file in memory) reached through
 * /proc/self/fd, so no disk is touched and every run sees a regular file. */
#ifndef TMM_FUZZ_UTIL_H
#define TMM_FUZZ_UTIL_H

#define _GNU_SOURCE /* memfd_create */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("tmm-fuzz", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz input");
        abort();
    }
    return path;
}

#endif
