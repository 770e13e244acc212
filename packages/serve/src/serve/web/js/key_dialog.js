// The dialog that asks for the API key, shared by the chat page and the dashboard: it opens when
// the server answers 401 (and from the page's #open-key button) and keeps the key for the tab.

import { onKeyNeeded, storeKey, storedKey } from "./api.js";
import { el } from "./dom.js";

const REASON = "This server asks for an API key. It is kept for this browser tab only.";

function keyDialog() {
  return el(
    "dialog",
    { id: "key-dialog", "aria-labelledby": "key-title" },
    el(
      "form",
      { method: "dialog" },
      el("h2", { id: "key-title", text: "API key" }),
      el("p", { id: "key-reason", text: REASON }),
      el("label", { for: "key-input", text: "API key" }),
      el("input", { id: "key-input", type: "password", autocomplete: "off", required: true }),
      el(
        "div",
        { class: "dialog-actions" },
        el("button", { type: "submit", class: "primary", value: "save", text: "Use this key" }),
        el("button", { type: "button", id: "key-cancel", text: "Cancel" }),
      ),
    ),
  );
}

/** Add the dialog to the page and answer each 401 by asking for the key through it. */
export function installKeyDialog() {
  const dialog = keyDialog();
  document.body.append(dialog);
  const input = dialog.querySelector("#key-input");
  const reason = dialog.querySelector("#key-reason");

  // Calls that meet a 401 together (the dashboard's polls) share the one question.
  let pending = null;

  function ask(message) {
    if (pending) return pending;
    reason.textContent = message ? `${message}. ${REASON}` : REASON;
    input.value = storedKey() || "";
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
    pending = new Promise((resolve) => {
      dialog.addEventListener(
        "close",
        () => {
          pending = null;
          const saved = dialog.returnValue === "save" && input.value.trim() !== "";
          if (saved) storeKey(input.value.trim());
          resolve(saved);
        },
        { once: true },
      );
    });
    return pending;
  }

  dialog.querySelector("#key-cancel").addEventListener("click", () => dialog.close("cancel"));
  document.getElementById("open-key").addEventListener("click", () => ask(""));
  onKeyNeeded(ask);
}
