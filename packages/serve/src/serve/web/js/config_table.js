// The resolved configuration as /server_info gives it: each leaf's value now and where it came
// from (default, file, env, cli, resolved:<handler>, or the override that changed it).

import { el } from "./dom.js";

function shown(value) {
  return value === null || value === undefined ? "unset" : typeof value === "string" ? value : JSON.stringify(value);
}

export function renderConfig(body, info, filter) {
  const wanted = filter.trim().toLowerCase();
  const rows = Object.entries(info.config.leaves)
    .filter(([name, leaf]) => !wanted || `${name} ${leaf.bag} ${leaf.provenance}`.toLowerCase().includes(wanted))
    .map(([name, leaf]) =>
      el(
        "tr",
        {},
        el("th", { scope: "row" }, el("code", { text: name })),
        el("td", { text: leaf.bag }),
        el("td", { text: shown(leaf.value) }),
        el("td", { text: leaf.provenance }),
      ),
    );
  body.replaceChildren(...rows);
}
