// The dashboard's figures of the moment and its table of processes, from one poll of /metrics,
// /server_info and /health.

import { el } from "./dom.js";

function percent(ratio) {
  return Number.isFinite(ratio) ? `${(ratio * 100).toFixed(1)} %` : "–";
}

/** [label, value] pairs of what the server is doing now. */
export function figuresOf(metrics, info) {
  const get = (name) => metrics.get(name);
  const pool = info.pool_and_queue;
  const used = pool ? 1 - pool.free_pages / pool.total_pages : get("serve_kv_usage_ratio");
  const grammar = info.structured_outputs;
  const speculative = info.speculative;
  return [
    ["Running requests", get("serve_num_running_requests") ?? pool?.running],
    ["Waiting requests", get("serve_num_waiting_requests") ?? pool?.waiting],
    ["KV pool in use", pool ? `${percent(used)} of ${pool.total_pages} pages (${pool.cached_pages} cached)` : percent(used)],
    ["Prefix-cache hit rate", percent(get("serve_cache_hit_rate"))],
    ["Requests finished", get("serve_requests_finished_total")],
    ["Requests aborted", get("serve_requests_aborted_total")],
    ["Requests failed", get("serve_requests_failed_total")],
    [
      "Speculative acceptance",
      speculative ? `${percent(speculative.acceptance_rate)} (${speculative.algorithm}, accept length ${Number(speculative.accept_length ?? 0).toFixed(2)})` : "off",
    ],
    [
      "Grammar compiles",
      grammar.grammar_backend === "none" ? "off" : `${grammar.compiles ?? 0} (${grammar.cache_hits ?? 0} cache hits, ${((grammar.compile_seconds ?? 0) * 1000).toFixed(0)} ms)`,
    ],
  ];
}

export function renderFigures(list, figures) {
  list.replaceChildren(
    ...figures.map(([label, value]) =>
      el("div", { class: "figure" }, el("dt", { text: label }), el("dd", { text: value === undefined ? "–" : String(value) })),
    ),
  );
}

/** One row per process: its role, pid and config hash, and whether it agrees with the main one. */
export function renderProcesses(body, info, health) {
  const mainHash = info.config_hashes.main;
  body.replaceChildren(
    ...Object.entries(info.processes).map(([name, process]) => {
      const agrees = process.config_hash === mainHash;
      const state = health.status !== "ok" ? `unhealthy: ${health.reason}` : agrees ? "ok" : "config differs from main";
      return el(
        "tr",
        {},
        el("th", { scope: "row", text: name }),
        el("td", { text: process.role }),
        el("td", { text: String(process.pid ?? "–") }),
        el("td", {}, el("code", { text: process.config_hash })),
        el("td", { class: state === "ok" ? "ok" : "bad", text: state }),
      );
    }),
  );
}
