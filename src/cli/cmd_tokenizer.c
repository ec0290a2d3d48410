/* tmm tokenizer train | encode | decode | convert (docs/tokenizer.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "io/limits.h"
#include "status.h"
#include "text/bpe_train.h"
#include "text/corpus.h"
#include "text/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tmm tokenizer train --vocab N --data FILE... --out tok.json [--max-words N] [--quiet]\n"
            "       tmm tokenizer encode [--tokenizer T] [--special] [--count] [--no-cache] (--file F | TEXT...)\n"
            "       tmm tokenizer decode [--tokenizer T] [--skip-special] [ID...]\n"
            "       tmm tokenizer convert [--encoding NAME] IN OUT\n\n"
            "BPE tokenizers as Hugging Face defines them (byte-level as GPT-2's and Llama 3's,\n"
            "SentencePiece-style as Llama 2's and Mistral's), read from and written to Hugging Face\n"
            "tokenizer.json; OpenAI's tiktoken encodings (r50k_base, p50k_base, cl100k_base, o200k_base)\n"
            "read from their .tiktoken files; and tmm's byte tokenizer ('bytes': byte b is token b,\n"
            "<|endoftext|> is 256). docs/tokenizer.md says what is supported and how training works.\n\n"
            "  train    learn a byte-level BPE of N entries (the 256 bytes, <|endoftext|>, N-257 merges)\n"
            "           from text files, JSONL files (a \"text\" field per line; by the .jsonl extension),\n"
            "           either gzip-compressed (.gz), or directories of them; deterministic\n"
            "  encode   print the token ids of TEXT (the arguments joined by spaces) or of a file\n"
            "  decode   print the bytes of token ids (arguments, or whitespace-separated on stdin)\n"
            "  convert  write any tokenizer tmm reads (a .tiktoken file, a tokenizer.json) as the\n"
            "           equivalent tokenizer.json, which tmm prepare and training use\n\n"
            "Each subcommand's --help lists its options.\n");
}

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: tmm tokenizer train --vocab N --data FILE... --out tok.json [options]\n\n"
            "  --vocab N        entries of the tokenizer: 257 (bytes and <|endoftext|>) to %u\n"
            "  --data FILE...   text, .jsonl, .gz files or directories (more may follow --data, which\n"
            "                   may repeat; directories recursively, in sorted order, skipping\n"
            "                   hidden names and symbolic links)\n"
            "  --out PATH       the tokenizer.json to write (atomically)\n"
            "  --max-words N    distinct words held while counting (default %u, about 100 bytes each):\n"
            "                   beyond it the rarest are dropped, which bounds memory on any corpus\n"
            "  --quiet          no progress bar\n\n"
            "Words are the GPT-2 pattern's pre-tokens; the most frequent adjacent pair is merged\n"
            "until the vocabulary is full, ties going to the smaller left id, then right id.\n",
            1u << 22, TMM_BPE_DEFAULT_MAX_WORDS);
}

static void encode_usage(FILE *f)
{
    fprintf(f, "usage: tmm tokenizer encode [options] (--file F | TEXT...)\n\n"
               "  --tokenizer T   a tokenizer.json, a .tiktoken file, or 'bytes' (the default)\n"
               "  --file F        encode the file's bytes (else the arguments, joined by spaces)\n"
               "  --special       as Hugging Face's encode with add_special_tokens: recognise special\n"
               "                  tokens written in the text (<|endoftext|>, <s>) and add the tokenizer's\n"
               "                  template (TemplateProcessing: Llama's <s> or <|begin_of_text|> first)\n"
               "  --count         print only the counts and the speed (one core): tokens, bytes,\n"
               "                  bytes/token, MB/s of encoding (reading excluded)\n"
               "  --no-cache      do not cache pre-tokenized words (to measure what the cache is worth)\n");
}

static void decode_usage(FILE *f)
{
    fprintf(f, "usage: tmm tokenizer decode [--tokenizer T] [--skip-special] [ID...]\n\n"
               "  --tokenizer T    a tokenizer.json, a .tiktoken file, or 'bytes' (the default)\n"
               "  --skip-special   leave special tokens out (else their text is printed)\n"
               "IDs come from the arguments, or whitespace-separated from stdin when there are none.\n"
               "The bytes are written to stdout exactly.\n");
}

static void convert_usage(FILE *f)
{
    fprintf(f, "usage: tmm tokenizer convert [--encoding NAME] IN OUT\n\n"
               "Reads IN (a .tiktoken file, a tokenizer.json) and writes the tokenizer.json that encodes\n"
               "every text to the same ids (atomically), for tmm prepare, training and other tools.\n"
               "A .tiktoken file holds only its ranks: its encoding's pattern and special tokens come\n"
               "from its name (cl100k_base.tiktoken), from --encoding, or from its number of ranks.\n\n"
               "  --encoding NAME   r50k_base, p50k_base, cl100k_base or o200k_base\n");
}

/* ---- train ------------------------------------------------------------------ */

typedef struct train_ui {
    bool quiet, tty;
    int last;
    tmm_bpe_counter *counter;
    double start_ms;
} train_ui;

static void bar(train_ui *ui, const char *phase, double frac, const char *detail)
{
    if (ui->quiet)
        return;
    int pct = (int)(100 * frac);
    if (ui->tty) {
        char b[33];
        int filled = (int)(32 * frac);
        for (int i = 0; i < 32; i++)
            b[i] = i < filled ? '#' : '.';
        b[32] = '\0';
        fprintf(stderr, "\r%-8s [%s] %3d%%  %s  %.0fs\033[K", phase, b, pct, detail,
                (tmm_bench_now_ms() - ui->start_ms) / 1e3);
    } else if (pct / 10 != ui->last / 10 || pct == 100) {
        fprintf(stderr, "%s %3d%%  %s  %.0fs\n", phase, pct, detail, (tmm_bench_now_ms() - ui->start_ms) / 1e3);
    }
    ui->last = pct;
}

static void read_progress(uint64_t done, uint64_t total, void *user)
{
    train_ui *ui = user;
    char a[32], b[32], detail[128];
    snprintf(detail, sizeof detail, "%s of %s, %llu distinct words", cli_size(done, a, sizeof a),
             cli_size(total, b, sizeof b), (unsigned long long)tmm_bpe_counter_distinct(ui->counter));
    bar(ui, "counting", total ? (double)done / (double)total : 1, detail);
}

static void merge_progress(uint32_t done, uint32_t total, void *user)
{
    char detail[64];
    snprintf(detail, sizeof detail, "%u/%u merges", done, total);
    bar(user, "merging", total ? (double)done / (double)total : 1, detail);
}

static tmm_status count_doc(const char *text, size_t n, void *user)
{
    return tmm_bpe_count(((train_ui *)user)->counter, text, n);
}

static int train(int argc, char **argv)
{
    static const struct option opts[] = { { "vocab", required_argument, 0, 'v' }, { "data", required_argument, 0, 'd' },
                                          { "out", required_argument, 0, 'o' },   { "max-words", required_argument, 0, 'm' },
                                          { "quiet", no_argument, 0, 'q' },       { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    unsigned long vocab = 0, max_words = TMM_BPE_DEFAULT_MAX_WORDS;
    const char *out = NULL;
    const char **data = calloc((size_t)argc + 1, sizeof *data);
    size_t n_data = 0;
    train_ui ui = { .tty = isatty(STDERR_FILENO), .last = -1, .start_ms = tmm_bench_now_ms() };
    int c;
    cli_args args = { .longopts = opts, .repeatable = (const int[]){ 'd', 0 } };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case 'v': if (!cli_parse_uint("--vocab", optarg, 1u << 22, &vocab)) return free(data), 2; break;
        case 'm': if (!cli_parse_uint("--max-words", optarg, 1ul << 40, &max_words)) return free(data), 2; break;
        case 'd': data[n_data++] = optarg; break;
        case 'o': out = optarg; break;
        case 'q': ui.quiet = true; break;
        case 'h': train_usage(stdout); return free(data), 0;
        default: train_usage(stderr); return free(data), 2;
        }
    }
    for (int i = optind; i < argc; i++)
        data[n_data++] = argv[i];
    if (!vocab || !n_data || !out) {
        cli_fail("needs --vocab N, --data FILE... and --out PATH (see 'tmm tokenizer train --help')\n");
        free(data);
        return 2;
    }
    if (cli_out_apart("--out", out, data, n_data))
        return free(data), 1;
    tmm_tokenizer *tok = NULL;
    tmm_status s = tmm_bpe_counter_new(max_words, &ui.counter);
    if (s == TMM_OK)
        s = tmm_distinct_files(data, n_data);
    if (s == TMM_OK)
        s = tmm_corpus_read(data, n_data, count_doc, read_progress, &ui);
    if (s == TMM_OK && !ui.quiet && ui.tty)
        fprintf(stderr, "\n");
    ui.last = -1;
    if (s == TMM_OK)
        s = tmm_bpe_train(ui.counter, (uint32_t)vocab, merge_progress, &ui, &tok);
    if (s == TMM_OK && !ui.quiet && ui.tty)
        fprintf(stderr, "\n");
    if (s == TMM_OK)
        s = tmm_tokenizer_save(tok, out);
    if (s == TMM_OK)
        printf("wrote %s: %u entries (%u merges) from %llu words, %llu distinct kept, in %.1f s\n", out,
               tmm_tokenizer_vocab(tok), tmm_tokenizer_vocab(tok) - 257,
               (unsigned long long)tmm_bpe_counter_total(ui.counter),
               (unsigned long long)tmm_bpe_counter_distinct(ui.counter), (tmm_bench_now_ms() - ui.start_ms) / 1e3);
    if (s == TMM_OK && tmm_tokenizer_vocab(tok) < vocab)
        tmm_warn("the corpus ran out of pairs: %u entries instead of %lu", tmm_tokenizer_vocab(tok), vocab);
    tmm_tokenizer_free(tok);
    tmm_bpe_counter_free(ui.counter);
    free(data);
    return s == TMM_OK ? 0 : cli_error("training failed", s);
}

/* ---- encode / decode ---------------------------------------------------------- */

static int encode(int argc, char **argv)
{
    static const struct option opts[] = { { "tokenizer", required_argument, 0, 't' }, { "file", required_argument, 0, 'f' },
                                          { "special", no_argument, 0, 's' },         { "count", no_argument, 0, 'c' },
                                          { "no-cache", no_argument, 0, 'n' },        { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *name = "bytes", *file = NULL;
    bool special = false, count = false, no_cache = false;
    int c;
    cli_args args = { .longopts = opts };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case 't': name = optarg; break;
        case 'f': file = optarg; break;
        case 's': special = true; break;
        case 'c': count = true; break;
        case 'n': no_cache = true; break;
        case 'h': encode_usage(stdout); return 0;
        default: encode_usage(stderr); return 2;
        }
    }
    if ((file != NULL) == (optind < argc)) {
        cli_fail("give either --file F or the text as arguments (see 'tmm tokenizer encode --help')\n");
        return 2;
    }
    tmm_tokenizer *tok = NULL;
    tmm_tok_cache *cache = tmm_tok_cache_new();
    tmm_tokens ids = { 0 };
    tmm_bytes text = { 0 };
    tmm_status s = cache ? tmm_tokenizer_load(name, &tok) : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if (s == TMM_OK && file) {
        void *data;
        size_t n;
        if ((s = tmm_read_file(file, "text file", TMM_LIMIT_TEXT, &data, &n)) == TMM_OK)
            text = (tmm_bytes){ data, n, n + 1 };
    }
    for (int i = optind; i < argc && s == TMM_OK; i++)
        if ((s = tmm_bytes_append(&text, " ", i > optind)) == TMM_OK)
            s = tmm_bytes_append(&text, argv[i], strlen(argv[i]));
    if (s == TMM_OK && no_cache)
        tmm_tok_cache_disable_words(cache);
    double t0 = tmm_bench_now_ms();
    if (s == TMM_OK)
        s = tmm_tokenizer_encode(tok, cache, text.data ? text.data : "", text.length, special, &ids);
    if (s == TMM_OK && special)
        s = tmm_tokenizer_add_special(tok, &ids, 0);
    double ms = tmm_bench_now_ms() - t0;
    if (s == TMM_OK && count) {
        printf("tokens %zu  bytes %zu  bytes/token %.3f  %.2f MB/s  (%s, word cache %s)\n", ids.count, text.length,
               ids.count ? (double)text.length / (double)ids.count : 0.0, (double)text.length / 1e3 / (ms > 0 ? ms : 1e-3),
               tmm_tokenizer_kind(tok), no_cache ? "off" : "on");
    } else if (s == TMM_OK) {
        for (size_t i = 0; i < ids.count; i++)
            printf("%s%u", i ? " " : "", ids.ids[i]);
        printf("\n");
    }
    free(ids.ids), free(text.data);
    tmm_tok_cache_free(cache);
    tmm_tokenizer_free(tok);
    return s == TMM_OK ? 0 : cli_error("cannot encode", s);
}

static tmm_status parse_id(const char *w, tmm_tokens *ids)
{
    char *end;
    unsigned long long v = strtoull(w, &end, 10);
    if (end == w || *end || w[0] == '-' || v > UINT32_MAX)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "'%.40s' is not a token id", w);
    return tmm_tokens_push(ids, (uint32_t)v);
}

static tmm_status read_ids(tmm_tokens *ids)
{
    char word[32];
    int ch;
    size_t n = 0;
    tmm_status s = TMM_OK;
    while (s == TMM_OK && (ch = getchar()) != EOF) {
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
            if (n) {
                word[n] = '\0';
                s = parse_id(word, ids);
            }
            n = 0;
        } else if (n + 1 < sizeof word) {
            word[n++] = (char)ch;
        } else {
            word[n] = '\0';
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "'%s...' is not a token id", word);
        }
    }
    if (s == TMM_OK && n) {
        word[n] = '\0';
        s = parse_id(word, ids);
    }
    return s;
}

static int decode(int argc, char **argv)
{
    static const struct option opts[] = { { "tokenizer", required_argument, 0, 't' },
                                          { "skip-special", no_argument, 0, 's' },
                                          { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *name = "bytes";
    bool special = true;
    int c;
    cli_args args = { .longopts = opts };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case 't': name = optarg; break;
        case 's': special = false; break;
        case 'h': decode_usage(stdout); return 0;
        default: decode_usage(stderr); return 2;
        }
    }
    tmm_tokenizer *tok = NULL;
    tmm_tokens ids = { 0 };
    tmm_bytes out = { 0 };
    tmm_status s = tmm_tokenizer_load(name, &tok);
    for (int i = optind; i < argc && s == TMM_OK; i++)
        s = parse_id(argv[i], &ids);
    if (s == TMM_OK && optind == argc)
        s = read_ids(&ids);
    if (s == TMM_OK)
        s = tmm_tokenizer_decode(tok, ids.ids, ids.count, special, &out);
    if (s == TMM_OK && out.length && fwrite(out.data, 1, out.length, stdout) != out.length)
        s = tmm_fail(TMM_ERR_IO, "cannot write to stdout");
    free(ids.ids), free(out.data);
    tmm_tokenizer_free(tok);
    return s == TMM_OK ? 0 : cli_error("cannot decode", s);
}

static int convert(int argc, char **argv)
{
    static const struct option opts[] = { { "encoding", required_argument, 0, 'e' }, { "help", no_argument, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    const char *encoding = NULL;
    int c;
    cli_args args = { .longopts = opts };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case 'e': encoding = optarg; break;
        case 'h': convert_usage(stdout); return 0;
        default: convert_usage(stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        cli_fail("needs IN and OUT (see 'tmm tokenizer convert --help')\n");
        return 2;
    }
    if (cli_out_apart("OUT", argv[optind + 1], (const char *const *)&argv[optind], 1))
        return 1;
    tmm_tokenizer *tok = NULL;
    tmm_status s = tmm_tokenizer_load_as(argv[optind], encoding, &tok);
    if (s == TMM_OK)
        s = tmm_tokenizer_save(tok, argv[optind + 1]);
    if (s == TMM_OK)
        printf("wrote %s: %u ids (%s), end-of-text %u\n", argv[optind + 1], tmm_tokenizer_vocab(tok),
               tmm_tokenizer_kind(tok), tmm_tokenizer_eot(tok));
    tmm_tokenizer_free(tok);
    return s == TMM_OK ? 0 : cli_error("cannot convert", s);
}

int cmd_tokenizer(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(sub, "train") == 0) {
        cli_command = "tokenizer train";
        return train(argc - 1, argv + 1);
    }
    if (strcmp(sub, "encode") == 0) {
        cli_command = "tokenizer encode";
        return encode(argc - 1, argv + 1);
    }
    if (strcmp(sub, "decode") == 0) {
        cli_command = "tokenizer decode";
        return decode(argc - 1, argv + 1);
    }
    if (strcmp(sub, "convert") == 0) {
        cli_command = "tokenizer convert";
        return convert(argc - 1, argv + 1);
    }
    cli_fail("unknown subcommand '%s' (train, encode, decode or convert; see 'tmm tokenizer --help')\n", sub);
    return 2;
}
