#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct command {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
    { "prepare", cmd_prepare, "tokenize a corpus into token shards for tmm train --data DIR" },
    { "train", cmd_train, "train a TMM (default: the copy task, until 99% held-out accuracy)" },
    { "eval", cmd_eval, "evaluate a checkpoint on its task's held-out data" },
    { "generate", cmd_generate, "continue a prompt with a trained model (FFT prefill, cached decoding)" },
    { "serve", cmd_serve, "serve a checkpoint over HTTP with OpenAI's API (continuous batching)" },
    { "distill", cmd_distill, "fit a TMM's Toeplitz vectors with small state-space models: O(r) decoding" },
    { "index", cmd_index, "Fredholm index, zeros and singular values of a checkpoint's Toeplitz layers" },
    { "devices", cmd_devices, "list Vulkan devices, their limits and features, and which one tmm picks" },
    { "check", cmd_check, "run one kernel on the device and compare it with the C reference" },
    { "tokenizer", cmd_tokenizer, "train, inspect and use byte-level BPE tokenizers (tokenizer.json)" },
    { "bench", cmd_bench, "measure the device: matmul, train, mixer, generate (tmm bench --help)" },
    { "experiment", cmd_experiment, "rerun one of the paper's comparisons: results, plots and a report" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tmm <command> [options]\n"
               "       tmm <command> --help\n\n"
               "tmm trains and runs Toeplitz MLP Mixer language models on any Vulkan device.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions:\n"
               "  -h, --help     show this help\n"
               "  -V, --version  print the version\n\n"
               "A command's option that takes a value is given once (a second is an error), unless its\n"
               "--help says it repeats (lists such as --data).\n\n"
               "environment:\n"
               "  TMM_DEVICE=N     use Vulkan device N (see 'tmm devices'); --device N overrides it\n"
               "  TMM_VALIDATE=1   enable the Khronos validation layer\n"
               "  TMM_CACHE_DIR    where the pipeline cache lives (default $XDG_CACHE_HOME/tmm)\n"
               "  TMM_DISABLE_COOPMAT=1, TMM_COOPMAT_EXTENSION=NV|KHR\n"
               "                   the GPU's cooperative-matrix matmul: off, or through one extension\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    cli_program = argv[0];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("tmm %s\n", tmm_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            cli_command = commands[i].name;
            return commands[i].run(argc - 1, argv + 1);
        }
    cli_fail("unknown command '%s'; run 'tmm --help' for the list\n", cmd);
    return 2;
}
