/* libFuzzer harness: tmm serve's request parser (src/serve/serve_request.c)
 * and what the server does with what it accepts. The first byte picks the
 * endpoint ('1': /v1/chat/completions, else /v1/completions), the rest is
 * the body. Any input is accepted or refused with a one-line 400 message;
 * an accepted request keeps its limits (prompts x n, stop sequences, token
 * ids below the vocabulary); its prompts fed as generated text through the
 * stop sequences never release more than they hold; and every JSON the
 * server would write of them (the strings, the error object) parses. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_jw.h"
#include "serve/serve_json.h"
#include "serve/serve_request.h"
#include "serve/serve_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parses(serve_jw *w)
{
    size_t n;
    char *s = jw_take(w, &n);
    assert(s);
    cJSON *j = cJSON_ParseWithLength(s, n);
    assert(j);
    cJSON_Delete(j);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const serve_kind kind = data[0] == '1' ? SERVE_CHAT : SERVE_COMPLETION;
    const uint32_t vocab = 257;
    serve_request r;
    serve_error e;
    if (!serve_request_parse(kind, (const char *)data + 1, size - 1, vocab, &r, &e)) {
        assert(e.status == 400 || e.status == 500);
        assert(e.message[0] && !strchr(e.message, '\n'));
        serve_jw w = { 0 };
        serve_json_error(&w, &e);
        parses(&w);
        return 0;
    }
    assert(r.model && r.n_prompts >= 1 && r.n >= 1 && r.n_prompts * r.n <= SERVE_MAX_CHOICES);
    assert(r.stops.count <= SERVE_MAX_STOP + 1 && r.top_logprobs <= SERVE_MAX_TOP);
    assert(r.temperature >= 0 && r.temperature <= 2 && r.top_p >= 0 && r.top_p <= 1);
    for (uint32_t i = 0; i < r.n_prompts; i++) {
        const serve_prompt *p = &r.prompts[i];
        assert(!p->text != !p->tokens);
        for (uint32_t t = 0; p->tokens && t < p->count; t++)
            assert(p->tokens[t] < vocab);
        if (!p->text)
            continue;
        /* the prompt as generated text, 3 bytes at a time, through the stop sequences */
        serve_text text = { 0 };
        for (size_t at = 0; at < p->length && !text.stopped; at += 3) {
            const size_t n = p->length - at < 3 ? p->length - at : 3;
            assert(serve_text_append(&text, &r.stops, p->text + at, n) == TMM_OK);
            assert(text.committed <= text.all.length);
        }
        serve_text_finish(&text);
        assert(text.committed == text.all.length && text.all.length <= p->length);
        serve_jw w = { 0 };
        jw_arr(&w);
        jw_str(&w, text.all.data ? text.all.data : "", text.all.length);
        jw_str(&w, p->text, p->length);
        jw_end_arr(&w);
        parses(&w);
        serve_text_free(&text);
    }
    serve_request_free(&r);
    return 0;
}
