// The chat page: the conversation list, the composer, sending, stopping, regenerating, editing
// into a branch and answering tool calls.

import { callJson } from "./api.js";
import { chatRequest } from "./chat_request.js";
import { streamAnswer } from "./chat_stream.js";
import { messageItems } from "./chat_view.js";
import * as store from "./conversations.js";
import { el } from "./dom.js";
import { installKeyDialog } from "./key_dialog.js";
import { bindSettings } from "./settings_form.js";

const messagesList = document.getElementById("messages");
const composer = document.getElementById("composer");
const input = document.getElementById("composer-input");
const sendButton = document.getElementById("send");
const stopButton = document.getElementById("stop");
const list = document.getElementById("conversation-list");

let conversations = store.loadAll();
let current = conversations[0] || store.newConversation();
let streamingId = null;
let stopper = null;

const handlers = {
  onEdit: (node, text) => ask(node.parent, text),
  onRegenerate: (node) => answer(node.parent),
  onSwitch: (node) => {
    store.switchTo(current, node);
    save();
    render();
  },
  onToolResults: (assistant, results) => {
    let parent = assistant.id;
    for (const { call, content } of results) {
      parent = store.addMessage(current, parent, { role: "tool", tool_call_id: call.id, name: call.function.name, content }).id;
    }
    answer(parent);
  },
};

function save() {
  if (!conversations.includes(current)) conversations.unshift(current);
  store.saveAll(conversations);
}

function nearBottom() {
  return messagesList.scrollHeight - messagesList.scrollTop - messagesList.clientHeight < 80;
}

function render() {
  const pinned = nearBottom();
  // Busy while an answer streams, so a screen reader reads the answer once, not every re-render.
  messagesList.setAttribute("aria-busy", String(streamingId !== null));
  messagesList.replaceChildren(...messageItems(current, streamingId, handlers));
  if (pinned || streamingId) messagesList.scrollTop = messagesList.scrollHeight;
  sendButton.disabled = streamingId !== null;
  stopButton.hidden = streamingId === null;
  renderList();
}

function renderList() {
  const items = conversations.map((conversation) =>
    el(
      "li",
      {},
      el("button", {
        type: "button",
        class: "conversation",
        text: conversation.title || "New chat",
        "aria-current": conversation === current ? "true" : null,
        onclick: () => open(conversation),
      }),
      el("button", {
        type: "button",
        class: "delete",
        text: "✕",
        "aria-label": `Delete ${conversation.title}`,
        onclick: () => remove(conversation),
      }),
    ),
  );
  list.replaceChildren(...items);
}

const showSettings = bindSettings(document.getElementById("settings-form"), () => current, save);

function open(conversation) {
  if (streamingId) return;
  current = conversation;
  showSettings(current.settings);
  render();
  closeSidebarOnPhone();
}

function remove(conversation) {
  if (streamingId && conversation === current) return;
  if (!confirm(`Delete "${conversation.title}"?`)) return;
  conversations = conversations.filter((other) => other !== conversation);
  store.saveAll(conversations);
  if (conversation === current) open(conversations[0] || store.newConversation(current.settings));
  else renderList();
}

/** Stream a new answer under `parent` (a user or tool message, or null for none). */
async function answer(parent) {
  let body;
  try {
    body = chatRequest(current.settings, store.pathTo(current, parent));
  } catch (error) {
    const node = store.addMessage(current, parent, { role: "assistant", content: "", error: error.message });
    save();
    render();
    return;
  }
  const node = store.addMessage(current, parent, { role: "assistant", content: "" });
  streamingId = node.id;
  stopper = new AbortController();
  save();
  render();
  let frame = null;
  await streamAnswer(body, node, stopper.signal, () => {
    frame ??= requestAnimationFrame(() => {
      frame = null;
      render();
    });
  });
  if (frame !== null) cancelAnimationFrame(frame); // the render below shows the finished answer
  streamingId = null;
  stopper = null;
  save();
  render();
  input.focus();
}

function ask(parent, text) {
  const node = store.addMessage(current, parent, { role: "user", content: text });
  return answer(node.id);
}

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value;
  if (!text.trim() || streamingId) return;
  input.value = "";
  ask(current.leaf, text);
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

stopButton.addEventListener("click", () => stopper?.abort());

document.getElementById("new-conversation").addEventListener("click", () => {
  if (!streamingId) open(store.newConversation(current.settings));
});

function download(name, text) {
  const link = el("a", { href: URL.createObjectURL(new Blob([text], { type: "application/json" })), download: name });
  link.click();
  URL.revokeObjectURL(link.href);
}

document.getElementById("export-conversations").addEventListener("click", () => {
  download(`conversations-${new Date().toISOString().slice(0, 10)}.json`, store.exported(conversations));
});

document.getElementById("import-conversations").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  event.target.value = "";
  if (!file) return;
  try {
    const known = new Set(conversations.map((conversation) => conversation.id));
    const added = store.imported(await file.text()).filter((conversation) => !known.has(conversation.id));
    conversations = [...added, ...conversations];
    store.saveAll(conversations);
    renderList();
  } catch (error) {
    alert(`Could not import ${file.name}: ${error.message}`);
  }
});

const settingsPanel = document.getElementById("settings");
const settingsButton = document.getElementById("open-settings");
function showSettingsPanel(shown) {
  settingsPanel.hidden = !shown;
  settingsButton.setAttribute("aria-expanded", String(shown));
  if (shown) document.getElementById("setting-system").focus();
  else settingsButton.focus();
}
settingsButton.addEventListener("click", () => showSettingsPanel(settingsPanel.hidden));
document.getElementById("close-settings").addEventListener("click", () => showSettingsPanel(false));

const sidebar = document.getElementById("sidebar");
function closeSidebarOnPhone() {
  if (matchMedia("(max-width: 720px)").matches) {
    sidebar.classList.remove("open");
    document.getElementById("toggle-sidebar").setAttribute("aria-expanded", "false");
  }
}
document.getElementById("toggle-sidebar").addEventListener("click", (event) => {
  const opened = sidebar.classList.toggle("open");
  event.currentTarget.setAttribute("aria-expanded", String(opened));
});

installKeyDialog();
showSettings(current.settings);
render();
callJson("/v1/models")
  .then((models) => {
    document.getElementById("model-name").textContent = models.data[0]?.id ?? "";
  })
  .catch((error) => {
    document.getElementById("model-name").textContent = `(${error.message})`;
  });
