// The samples of a Prometheus text exposition (GET /metrics), as the dashboard reads them.

/** name (with its labels, as written: `serve_replica_kv_usage_ratio{replica="0"}`) -> value. */
export function samples(text) {
  const found = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    found.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return found;
}
