// The body of a streamed /v1/chat/completions request for a conversation's shown path and settings.

/** A setting's number, or undefined when the field is empty (the server's default then applies). */
function numberOf(text) {
  return text === "" || text === undefined || text === null ? undefined : Number(text);
}

function parsedJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

/** The pasted function definitions as OpenAI tools: either already {type, function} or bare functions. */
export function toolsOf(settings) {
  if (!settings.tools.trim()) return [];
  const pasted = parsedJson(settings.tools, "Tools");
  const list = Array.isArray(pasted) ? pasted : [pasted];
  return list.map((tool) => (tool.type === "function" && tool.function ? tool : { type: "function", function: tool }));
}

function toolChoiceOf(settings) {
  const choice = settings.tool_choice;
  if (choice === "auto" || choice === "required" || choice === "none") return choice;
  return { type: "function", function: { name: choice } };
}

function messageOf(node) {
  if (node.role === "assistant") {
    const message = { role: "assistant", content: node.content || "" };
    if (node.tool_calls && node.tool_calls.length) message.tool_calls = node.tool_calls;
    return message;
  }
  if (node.role === "tool") return { role: "tool", tool_call_id: node.tool_call_id, content: node.content };
  return { role: node.role, content: node.content };
}

/** The request body; throws an Error naming the setting that cannot be read. */
export function chatRequest(settings, shown) {
  const messages = [];
  if (settings.system.trim()) messages.push({ role: "system", content: settings.system });
  // An answer that failed or was stopped before it said anything is not part of the conversation.
  for (const node of shown) {
    if (node.role === "assistant" && !node.content && !(node.tool_calls && node.tool_calls.length)) continue;
    messages.push(messageOf(node));
  }
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  for (const name of ["temperature", "top_p", "max_tokens", "seed"]) {
    const value = numberOf(settings[name]);
    if (value !== undefined) body[name] = value;
  }
  if (settings.json_schema.trim()) {
    const schema = parsedJson(settings.json_schema, "The JSON schema");
    body.response_format = { type: "json_schema", json_schema: { name: "output", schema } };
  }
  const tools = toolsOf(settings);
  if (tools.length) {
    body.tools = tools;
    body.tool_choice = toolChoiceOf(settings);
    if (settings.one_call) body.parallel_tool_calls = false;
  }
  return body;
}
