// tmm serve against the official openai JavaScript client (tests/serve_test.sh):
// completions, chat, streaming, log-probabilities, several choices, and the errors
// the client turns into its own exception classes.
//   node client.mjs BASE_URL API_KEY MODEL
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
let failed = 0, passed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed++;
  } catch (e) {
    failed++;
    console.log(`FAIL: openai client: ${name}: ${e && e.stack ? e.stack.split("\n").slice(0, 3).join(" | ") : e}`);
  }
}
function assert(cond, what) {
  if (!cond) throw new Error(what);
}
async function fails(fn, cls, status, words) {
  try {
    await fn();
  } catch (e) {
    assert(e instanceof cls, `expected ${cls.name}, got ${e && e.constructor && e.constructor.name}: ${e}`);
    assert(e.status === status, `expected status ${status}, got ${e.status}`);
    assert(!words || String(e.message).includes(words), `expected '${words}' in '${e.message}'`);
    assert(e.error && typeof e.error.message === "string" && "type" in e.error && "code" in e.error,
           `the error object lacks message, type or code: ${JSON.stringify(e.error)}`);
    return e;
  }
  throw new Error("no error");
}

await check("models.list", async () => {
  const page = await client.models.list();
  assert(page.data.some((m) => m.id === model && m.object === "model"), JSON.stringify(page.data));
  const one = await client.models.retrieve(model);
  assert(one.id === model, JSON.stringify(one));
});

let whole;
await check("completions.create", async () => {
  whole = await client.completions.create({ model, prompt: "the quick", max_tokens: 12, seed: 3 });
  const c = whole.choices[0];
  assert(whole.object === "text_completion" && typeof c.text === "string", JSON.stringify(whole));
  assert(["length", "stop"].includes(c.finish_reason), c.finish_reason);
  assert(whole.usage.prompt_tokens === 9 && whole.usage.completion_tokens <= 12 &&
         whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens,
         JSON.stringify(whole.usage));
});

await check("completions.create, stream: the same text as whole", async () => {
  const stream = await client.completions.create({ model, prompt: "the quick", max_tokens: 12, seed: 3,
                                                   stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, events = 0;
  for await (const chunk of stream) {
    events++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(events > 2, `${events} events`);
  assert(text === whole.choices[0].text, `streamed ${JSON.stringify(text)}, whole ${JSON.stringify(whole.choices[0].text)}`);
  assert(finish === whole.choices[0].finish_reason, finish);
  assert(usage && usage.completion_tokens === whole.usage.completion_tokens, JSON.stringify(usage));
});

await check("completions: logprobs, echo, two prompts and n = 2", async () => {
  const r = await client.completions.create({ model, prompt: ["the quick", "over the"], n: 2, max_tokens: 5,
                                             logprobs: 3, echo: true, seed: 11 });
  assert(r.choices.length === 4 && r.choices.map((c) => c.index).join() === "0,1,2,3", JSON.stringify(r.choices));
  for (const c of r.choices) {
    const lp = c.logprobs;
    assert(lp.tokens.length === lp.token_logprobs.length && lp.tokens.length === lp.top_logprobs.length &&
           lp.tokens.length === lp.text_offset.length, JSON.stringify(lp));
    assert(lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, "the prompt's first token has no logprob");
    assert(lp.token_logprobs.slice(1).every((x) => x <= 0), JSON.stringify(lp.token_logprobs));
    assert(lp.top_logprobs.slice(1).every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 3),
           JSON.stringify(lp.top_logprobs));
    assert(c.text.startsWith(c.index < 2 ? "the quick" : "over the"), c.text);
  }
  assert(r.usage.prompt_tokens === 9 + 8, JSON.stringify(r.usage));
});

let chat;
await check("chat.completions.create", async () => {
  chat = await client.chat.completions.create({ model, messages: [{ role: "system", content: "Be brief." },
                                                                   { role: "user", content: "the quick" }],
                                                max_tokens: 10, seed: 5, logprobs: true, top_logprobs: 2 });
  const c = chat.choices[0];
  assert(chat.object === "chat.completion" && c.message.role === "assistant" &&
         typeof c.message.content === "string", JSON.stringify(chat));
  assert(c.logprobs.content.length === chat.usage.completion_tokens, JSON.stringify(c.logprobs));
  assert(c.logprobs.content.every((t) => t.top_logprobs.length === 2 && Array.isArray(t.bytes)),
         JSON.stringify(c.logprobs.content[0]));
});

await check("chat.completions.create, stream: the same content as whole", async () => {
  const stream = await client.chat.completions.create({ model, messages: [{ role: "system", content: "Be brief." },
                                                                          { role: "user", content: "the quick" }],
                                                        max_tokens: 10, seed: 5, stream: true });
  let text = "", role = null, finish = null;
  for await (const chunk of stream) {
    assert(chunk.object === "chat.completion.chunk", chunk.object);
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert(role === "assistant", role);
  assert(text === chat.choices[0].message.content, `${JSON.stringify(text)} vs ${JSON.stringify(chat.choices[0].message.content)}`);
  assert(finish === chat.choices[0].finish_reason, finish);
});

await check("errors: a wrong API key is AuthenticationError (401)", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 });
  const e = await fails(() => bad.completions.create({ model, prompt: "x", max_tokens: 1 }), OpenAI.AuthenticationError, 401);
  assert(e.code === "invalid_api_key", e.code);
});
await check("errors: temperature 5 is BadRequestError (400) naming the param", async () => {
  const e = await fails(() => client.completions.create({ model, prompt: "x", temperature: 5 }),
                        OpenAI.BadRequestError, 400, "temperature");
  assert(e.param === "temperature" && e.type === "invalid_request_error", JSON.stringify(e.error));
});
await check("errors: an unknown field is BadRequestError (400)", async () => {
  await fails(() => client.completions.create({ model, prompt: "x", frobnicate: 1 }), OpenAI.BadRequestError, 400,
              "Unrecognized request argument supplied: frobnicate");
});
await check("errors: an unknown model is NotFoundError (404)", async () => {
  const e = await fails(() => client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
                        OpenAI.NotFoundError, 404);
  assert(e.code === "model_not_found", e.code);
});
await check("errors: a prompt longer than the context is BadRequestError (400)", async () => {
  const e = await fails(() => client.completions.create({ model, prompt: "x".repeat(5000), max_tokens: 1 }),
                        OpenAI.BadRequestError, 400, "maximum context length");
  assert(e.code === "context_length_exceeded", e.code);
});
await check("errors: in a stream too", async () => {
  await fails(async () => {
    for await (const _ of await client.completions.create({ model, prompt: "x", top_p: 2, stream: true })) { /* none */ }
  }, OpenAI.BadRequestError, 400, "top_p");
});

console.log(`openai client: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
