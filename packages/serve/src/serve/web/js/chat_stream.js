// One streamed answer: the deltas folded into the answer's message (content, reasoning, tool calls)
// and its figures timed here (time to first token, tokens per second) and read from the stream's
// usage chunk (prompt, completion and cached tokens).

import { call } from "./api.js";
import { events } from "./sse.js";

function foldToolCalls(calls, deltas) {
  for (const delta of deltas) {
    const call = (calls[delta.index] ||= { id: "", type: "function", function: { name: "", arguments: "" } });
    if (delta.id) call.id = delta.id;
    if (delta.function?.name) call.function.name += delta.function.name;
    if (delta.function?.arguments) call.function.arguments += delta.function.arguments;
  }
}

/**
 * Stream the answer to `body` into `answer` (an assistant message), calling `update()` after each
 * chunk; stopping through `signal` keeps what came and marks it stopped. Errors end up in
 * `answer.error` with the server's message.
 */
export async function streamAnswer(body, answer, signal, update) {
  const sent = performance.now();
  let first = null;
  const calls = [];
  answer.content = "";
  answer.reasoning = "";
  try {
    const response = await call("/v1/chat/completions", { method: "POST", body, signal });
    for await (const chunk of events(response)) {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) answer.usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) continue;
      const delta = choice.delta || {};
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (delta.content || reasoning || delta.tool_calls) first ??= performance.now();
      if (delta.content) answer.content += delta.content;
      if (reasoning) answer.reasoning += reasoning;
      if (delta.tool_calls) foldToolCalls(calls, delta.tool_calls);
      if (calls.length) answer.tool_calls = calls.filter(Boolean);
      if (choice.finish_reason) answer.finish_reason = choice.finish_reason;
      update();
    }
  } catch (error) {
    if (error.name === "AbortError") answer.stopped = true;
    else answer.error = error.message;
  }
  const done = performance.now();
  if (first !== null) {
    answer.stats = { ttft_ms: first - sent, seconds: (done - first) / 1000 };
    if (answer.usage) answer.stats.tokens_per_second = answer.usage.completion_tokens / Math.max(answer.stats.seconds, 1e-3);
  }
  update();
}
