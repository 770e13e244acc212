// The dashboard: polls /metrics, /server_info and /health every two seconds and shows what the
// server is doing, its processes and its configuration; hot leaves change from here.

import { call, callJson } from "./api.js";
import { renderConfig } from "./config_table.js";
import { HotLeaves } from "./hot_leaves.js";
import { installKeyDialog } from "./key_dialog.js";
import { samples } from "./prometheus.js";
import { figuresOf, renderFigures, renderProcesses } from "./server_figures.js";
import { ThroughputChart } from "./throughput_chart.js";

const POLL_MS = 2000;
const status = document.getElementById("refresh-status");
const filter = document.getElementById("config-filter");
const chart = new ThroughputChart(document.getElementById("throughput"), document.getElementById("throughput-legend"));
let info = null;

async function metricsText() {
  try {
    return await (await call("/metrics")).text();
  } catch (error) {
    // metrics may be off (observability.enable_metrics); /server_info still tells most
    if (error.status === 404) return "";
    throw error;
  }
}

async function health() {
  const response = await fetch("/health");
  return response.json();
}

async function poll() {
  try {
    const [text, latest, healthy] = await Promise.all([metricsText(), callJson("/server_info"), health()]);
    info = latest;
    const metrics = samples(text);
    document.getElementById("model-name").textContent = info.model.name;
    renderFigures(document.getElementById("figures"), figuresOf(metrics, info));
    chart.add(Date.now(), metrics.get("serve_prompt_tokens_total") ?? 0, metrics.get("serve_generation_tokens_total") ?? 0);
    renderProcesses(document.querySelector("#processes tbody"), info, healthy);
    renderConfig(document.querySelector("#config tbody"), info, filter.value);
    status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    status.textContent = `Could not read the server: ${error.message}`;
  }
}

installKeyDialog();
filter.addEventListener("input", () => info && renderConfig(document.querySelector("#config tbody"), info, filter.value));
const hot = new HotLeaves(document.getElementById("hot-form"), poll);

async function loop() {
  await poll();
  setTimeout(loop, POLL_MS);
}
hot.load().catch((error) => {
  document.getElementById("hot-result").textContent = error.message;
});
loop();
