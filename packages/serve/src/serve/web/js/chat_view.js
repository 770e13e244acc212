// The messages of the shown path as list items: markdown answers with their folded reasoning,
// tool calls as cards, the server's error in the bubble, the answer's figures under it, and the
// actions on each message (edit, regenerate, switch between branches).

import { path, siblings } from "./conversations.js";
import { el } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

function statsText(node) {
  const parts = [];
  const stats = node.stats;
  if (stats?.tokens_per_second !== undefined) parts.push(`${stats.tokens_per_second.toFixed(1)} tokens/s`);
  if (stats?.ttft_ms !== undefined) parts.push(`TTFT ${Math.round(stats.ttft_ms)} ms`);
  if (node.usage) {
    const cached = node.usage.prompt_tokens_details?.cached_tokens ?? 0;
    parts.push(`${cached} of ${node.usage.prompt_tokens} prompt tokens cached`);
    parts.push(`${node.usage.completion_tokens} tokens out`);
  }
  if (node.stopped) parts.push("stopped");
  return parts.join(" · ");
}

function branchNav(conversation, node, handlers) {
  const all = siblings(conversation, node);
  if (all.length < 2) return null;
  const at = all.findIndex((other) => other.id === node.id);
  return el(
    "span",
    { class: "branches", role: "group", "aria-label": "Branches" },
    el("button", {
      type: "button",
      text: "‹",
      "aria-label": "Previous branch",
      disabled: at === 0,
      onclick: () => handlers.onSwitch(all[at - 1]),
    }),
    el("span", { class: "branch-index", text: `${at + 1}/${all.length}` }),
    el("button", {
      type: "button",
      text: "›",
      "aria-label": "Next branch",
      disabled: at === all.length - 1,
      onclick: () => handlers.onSwitch(all[at + 1]),
    }),
  );
}

function argumentsText(call) {
  try {
    return JSON.stringify(JSON.parse(call.function.arguments), null, 2);
  } catch {
    return call.function.arguments;
  }
}

/** The cards of an answer's tool calls; with `awaiting`, each asks for its result. */
function toolCards(node, results, awaiting, handlers) {
  const fields = [];
  const cards = node.tool_calls.map((call, index) => {
    const result = results.find((tool) => tool.tool_call_id === call.id);
    const fieldId = `tool-result-${node.id}-${index}`;
    const field = awaiting ? el("textarea", { id: fieldId, rows: 2, class: "tool-result-input", required: true }) : null;
    if (field) fields.push([call, field]);
    return el(
      "section",
      { class: "tool-card", "aria-label": `Tool call ${call.function.name}` },
      el("h3", { text: `Calls ${call.function.name}` }),
      el("pre", { class: "tool-arguments", text: argumentsText(call) }),
      result ? el("p", { class: "tool-result" }, el("strong", { text: "Result: " }), result.content) : null,
      field ? el("label", { for: fieldId, text: `Result of ${call.function.name}` }) : null,
      field,
    );
  });
  if (awaiting) {
    const send = () => {
      if (fields.some(([, field]) => !field.reportValidity())) return;
      handlers.onToolResults(node, fields.map(([call, field]) => ({ call, content: field.value })));
    };
    cards.push(el("button", { type: "button", class: "primary send-tool-results", text: "Send results", onclick: send }));
  }
  return cards;
}

function editor(node, handlers, close) {
  const id = `edit-${node.id}`;
  const field = el("textarea", { id, rows: 3 });
  field.value = node.content;
  return el(
    "form",
    {
      class: "editor",
      onsubmit: (event) => {
        event.preventDefault();
        if (field.value.trim()) handlers.onEdit(node, field.value);
      },
    },
    el("label", { for: id, class: "visually-hidden", text: "Edited message" }),
    field,
    el("button", { type: "submit", class: "primary", text: "Send as a new branch" }),
    el("button", { type: "button", text: "Cancel", onclick: close }),
  );
}

function userItem(conversation, node, busy, handlers) {
  const body = el("div", { class: "plain", text: node.content });
  const item = el("li", { class: "message role-user", "data-id": node.id }, el("span", { class: "who", text: "You" }), body);
  const edit = el("button", {
    type: "button",
    text: "Edit",
    disabled: busy,
    onclick: () => {
      const form = editor(node, handlers, () => form.replaceWith(body));
      body.replaceWith(form);
      form.querySelector("textarea").focus();
    },
  });
  item.append(el("div", { class: "actions" }, edit, branchNav(conversation, node, handlers)));
  return item;
}

function assistantItem(conversation, node, context, handlers) {
  const item = el("li", { class: "message role-assistant", "data-id": node.id }, el("span", { class: "who", text: "Assistant" }));
  if (node.reasoning) {
    const details = el("details", { class: "reasoning" }, el("summary", { text: "Reasoning" }), el("div", { class: "plain", text: node.reasoning }));
    details.open = !node.content && context.streaming;
    item.append(details);
  }
  if (node.content) {
    const answer = el("div", { class: "markdown" });
    answer.innerHTML = renderMarkdown(node.content); // sanitized by renderMarkdown
    item.append(answer);
  }
  if (node.tool_calls?.length) item.append(...toolCards(node, context.results, context.awaiting, handlers));
  if (context.streaming && !node.content && !node.reasoning) item.append(el("p", { class: "muted", text: "…" }));
  if (node.error) item.append(el("p", { class: "error", role: "alert", text: `The server refused: ${node.error}` }));
  const stats = statsText(node);
  if (stats) item.append(el("p", { class: "stats", text: stats }));
  const regenerate = el("button", { type: "button", class: "regenerate", text: "Regenerate", disabled: context.busy, onclick: () => handlers.onRegenerate(node) });
  item.append(el("div", { class: "actions" }, regenerate, branchNav(conversation, node, handlers)));
  return item;
}

/** The list items of the conversation's shown path; `streamingId` is the answer being written. */
export function messageItems(conversation, streamingId, handlers) {
  const shown = path(conversation);
  const busy = streamingId !== null;
  const items = [];
  shown.forEach((node, index) => {
    if (node.role === "user") items.push(userItem(conversation, node, busy, handlers));
    if (node.role !== "assistant") return;
    const results = shown.slice(index + 1).filter((later) => later.role === "tool");
    const awaiting = !busy && index === shown.length - 1 && node.tool_calls?.length > 0;
    const context = { results, awaiting, busy, streaming: node.id === streamingId };
    items.push(assistantItem(conversation, node, context, handlers));
  });
  return items;
}
