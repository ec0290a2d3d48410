/* tmm check: one dispatch on the device, compared with the C reference. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "buffer.h"
#include "cli.h"
#include "ref/ref.h"

#define N 4099 /* not a multiple of the workgroup size */

/* y += 0.5 x, with arg the views { x, y }. */
static tmm_status record_axpy(tmm_recorder *r, void *arg)
{
    const tmm_view *v = arg;
    return tmm_op_axpy(r, 0.5f, v[0], v[1], N);
}

static tmm_status run_axpy(tmm_device *dev, const float *x, float *y)
{
    tmm_buffer *bx = NULL, *by = NULL;
    tmm_status s;
    if ((s = tmm_buffer_create(dev, N * sizeof(float), TMM_MEMORY_DEVICE, &bx)) == TMM_OK &&
        (s = tmm_buffer_create(dev, N * sizeof(float), TMM_MEMORY_DEVICE, &by)) == TMM_OK &&
        (s = tmm_buffer_write(bx, 0, x, N * sizeof(float))) == TMM_OK &&
        (s = tmm_buffer_write(by, 0, y, N * sizeof(float))) == TMM_OK &&
        (s = tmm_record_once(dev, record_axpy, (tmm_view[2]){ tmm_whole(bx), tmm_whole(by) })) == TMM_OK)
        s = tmm_buffer_read(by, 0, y, N * sizeof(float));
    tmm_buffer_destroy(bx);
    tmm_buffer_destroy(by);
    return s;
}

int cmd_check(int argc, char **argv)
{
    static const struct option longopts[] = { { "device", required_argument, NULL, 'd' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    int c, index = -1;
    unsigned long v;
    cli_args args = { .longopts = longopts, .shortopts = "d:h" };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case 'd':
            if (!cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v))
                return 2;
            index = (int)v;
            break;
        case 'h':
            printf("usage: tmm check [--device N]\n\n"
                   "Runs one kernel (y += a*x on %d floats) on the device and compares the result\n"
                   "with the C reference. Exits 0 when they agree.\n", N);
            return 0;
        default:
            return 2;
        }
    }
    tmm_device *dev;
    if (cli_open_device(index, &dev))
        return 1;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *ref = malloc(N * sizeof *ref);
    if (!x || !y || !ref) {
        cli_fail("out of memory\n");
        return 1;
    }
    for (int i = 0; i < N; i++) {
        x[i] = (float)sin(i * 0.37);
        y[i] = ref[i] = (float)cos(i * 0.11);
    }
    ref_axpy(0.5f, x, ref, N);
    tmm_status s = run_axpy(dev, x, y);
    int rc = 0;
    if (s != TMM_OK) {
        rc = cli_error("self-check failed", s);
    } else {
        double worst = 0;
        for (int i = 0; i < N; i++)
            worst = fmax(worst, fabs((double)y[i] - (double)ref[i]));
        if (worst > 1e-6) {
            cli_fail("self-check FAILED on %s: max |device - reference| = %g; "
                            "the driver computes wrong results\n", tmm_device_get_info(dev)->name, worst);
            rc = 1;
        } else {
            printf("self-check passed on %s: y += a*x over %d floats matches the C reference "
                   "(max |dev| = %g)\n", tmm_device_get_info(dev)->name, N, worst);
        }
    }
    free(x);
    free(y);
    free(ref);
    tmm_device_destroy(dev);
    return rc;
}
