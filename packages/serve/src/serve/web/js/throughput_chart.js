// Tokens per second in (prompt) and out (generated) over the last minutes, from the deltas of
// /metrics' token counters between polls, drawn on a canvas.

const WINDOW_MS = 5 * 60 * 1000;
const SERIES = [
  { key: "in", label: "in (prompt)", colour: "#0b5cad" },
  { key: "out", label: "out (generated)", colour: "#b35900" },
];

export class ThroughputChart {
  constructor(canvas, legend) {
    this.canvas = canvas;
    this.legend = legend;
    this.points = [];
    this.last = null;
  }

  /** Take the counters of one poll; a rate is known from the second poll on. */
  add(time, promptTokens, generatedTokens) {
    if (this.last) {
      const seconds = (time - this.last.time) / 1000;
      if (seconds > 0) {
        this.points.push({
          time,
          in: Math.max(0, promptTokens - this.last.prompt) / seconds,
          out: Math.max(0, generatedTokens - this.last.generated) / seconds,
        });
      }
    }
    this.last = { time, prompt: promptTokens, generated: generatedTokens };
    this.points = this.points.filter((point) => time - point.time <= WINDOW_MS);
    this.draw(time);
  }

  draw(now) {
    const context = this.canvas.getContext("2d");
    const { width, height } = this.canvas;
    context.clearRect(0, 0, width, height);
    const top = Math.max(1, ...this.points.flatMap((point) => [point.in, point.out]));
    context.strokeStyle = "#c9ced6";
    context.strokeRect(0.5, 0.5, width - 1, height - 1);
    context.fillStyle = "#4d5560";
    context.font = "12px system-ui, sans-serif";
    context.fillText(`${top.toFixed(0)} tok/s`, 6, 14);
    context.fillText("5 min ago", 6, height - 6);
    context.fillText("now", width - 28, height - 6);
    for (const series of SERIES) {
      context.strokeStyle = series.colour;
      context.lineWidth = 2;
      context.beginPath();
      this.points.forEach((point, index) => {
        const x = width - ((now - point.time) / WINDOW_MS) * width;
        const y = height - 20 - (point[series.key] / top) * (height - 40);
        if (index === 0) context.moveTo(x, y);
        else context.lineTo(x, y);
      });
      context.stroke();
    }
    const latest = this.points.at(-1);
    this.legend.textContent = SERIES.map((series) => `${series.label}: ${latest ? latest[series.key].toFixed(1) : "–"} tokens/s`).join(" · ");
  }
}
