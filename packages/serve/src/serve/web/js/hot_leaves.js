// The form that changes one hot leaf while serving (PATCH /v1/runtime_config): the server's answer
// is shown as it came, the new config hash or the refusal's own message.

import { callJson } from "./api.js";
import { el } from "./dom.js";

/** What the user typed as the leaf's value: JSON when it reads as JSON, else the text itself. */
function valueOf(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export class HotLeaves {
  constructor(form, applied) {
    this.form = form;
    this.select = form.querySelector("#hot-leaf");
    this.help = form.querySelector("#hot-help");
    this.input = form.querySelector("#hot-value");
    this.result = form.querySelector("#hot-result");
    this.hash = document.getElementById("config-hash");
    this.leaves = {};
    this.applied = applied;
    this.select.addEventListener("change", () => this.showLeaf());
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.apply();
    });
  }

  /** Show the leaves the server says may change now, keeping the one chosen. */
  async load() {
    const config = await callJson("/v1/runtime_config");
    this.hash.textContent = config.config_hash;
    const first = Object.keys(this.leaves).length === 0;
    this.leaves = config.leaves;
    if (first) {
      this.select.replaceChildren(...Object.keys(this.leaves).map((name) => el("option", { value: name, text: name })));
      this.showLeaf();
    }
  }

  showLeaf() {
    const leaf = this.leaves[this.select.value];
    if (!leaf) return;
    this.help.textContent = `${leaf.help} Accepts ${leaf.accepts}. Bag ${leaf.bag}.`;
    this.input.value = JSON.stringify(leaf.value);
  }

  async apply() {
    const name = this.select.value;
    this.result.className = "";
    this.result.textContent = "Applying…";
    try {
      const answer = await callJson("/v1/runtime_config", { method: "PATCH", body: { [name]: valueOf(this.input.value) } });
      this.hash.textContent = answer.config_hash;
      this.result.className = "ok";
      this.result.textContent = `Applied ${name} = ${JSON.stringify(answer.applied[name])} in every process. New config hash: ${answer.config_hash}`;
      await this.load();
      this.applied();
    } catch (error) {
      this.result.className = "error";
      this.result.textContent = error.message;
    }
  }
}
