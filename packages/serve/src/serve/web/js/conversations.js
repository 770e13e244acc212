// Conversations kept in the browser's localStorage. A conversation is a tree of messages: editing a
// message or regenerating an answer adds a sibling, so every branch stays and the page shows one
// path, from the root to the conversation's `leaf`.

const STORE_ITEM = "serve.conversations";
const FORMAT = "serve-web-ui-conversations";

export const DEFAULT_SETTINGS = {
  system: "",
  temperature: "",
  top_p: "",
  max_tokens: "",
  seed: "",
  json_schema: "",
  tools: "",
  tool_choice: "auto",
  one_call: false,
};

function newId() {
  return crypto.randomUUID();
}

export function loadAll() {
  try {
    const stored = JSON.parse(localStorage.getItem(STORE_ITEM) || "[]");
    return Array.isArray(stored) ? stored : [];
  } catch {
    return [];
  }
}

export function saveAll(conversations) {
  localStorage.setItem(STORE_ITEM, JSON.stringify(conversations));
}

export function newConversation(settings = DEFAULT_SETTINGS) {
  const now = Date.now();
  return { id: newId(), title: "New chat", created: now, updated: now, settings: { ...settings }, nodes: {}, leaf: null };
}

/** Add `message` under `parent` (null: a first message), make it the leaf, answer its node. */
export function addMessage(conversation, parent, message) {
  const node = { ...message, id: newId(), parent, created: Date.now() };
  conversation.nodes[node.id] = node;
  conversation.leaf = node.id;
  conversation.updated = node.created;
  if (conversation.title === "New chat" && node.role === "user") conversation.title = node.content.slice(0, 60);
  return node;
}

/** The messages from the root down to the node `nodeId`. */
export function pathTo(conversation, nodeId) {
  const shown = [];
  for (let id = nodeId; id; id = conversation.nodes[id].parent) shown.push(conversation.nodes[id]);
  return shown.reverse();
}

/** The messages shown: from the root to the leaf. */
export function path(conversation) {
  return pathTo(conversation, conversation.leaf);
}

/** The node and its siblings (the same parent), oldest first. */
export function siblings(conversation, node) {
  return Object.values(conversation.nodes)
    .filter((other) => other.parent === node.parent)
    .sort((a, b) => a.created - b.created);
}

/** Show the branch through `node`: its latest descendants down to a leaf. */
export function switchTo(conversation, node) {
  let current = node;
  for (;;) {
    const children = Object.values(conversation.nodes).filter((other) => other.parent === current.id);
    if (children.length === 0) break;
    current = children.sort((a, b) => b.created - a.created)[0];
  }
  conversation.leaf = current.id;
}

/** A file of all conversations, for export. */
export function exported(conversations) {
  return JSON.stringify({ format: FORMAT, version: 1, conversations }, null, 2);
}

/** The conversations in an exported file; an Error saying what is wrong with it otherwise. */
export function imported(text) {
  const file = JSON.parse(text);
  if (!file || file.format !== FORMAT || !Array.isArray(file.conversations)) {
    throw new Error(`not an export of this page (expected "format": "${FORMAT}")`);
  }
  for (const conversation of file.conversations) {
    if (typeof conversation.id !== "string" || typeof conversation.nodes !== "object") {
      throw new Error("a conversation in the file has no id or no messages");
    }
    conversation.settings = { ...DEFAULT_SETTINGS, ...conversation.settings };
  }
  return file.conversations;
}
