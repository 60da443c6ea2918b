// casstore report: draws every chart from the JSON embedded once in <script id="data">.
// No library, no network: SVG for the small charts, canvas for the per-task ones.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const COLORS = ["#2f6fdf", "#e0752d", "#2a9d6f", "#9b4dca", "#c23b5a", "#6b7a8f"];
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const fmt = (v, d = 4) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
  const interval = (lo, hi) => (lo === null || lo === undefined ? "—"
    : "[" + fmt(lo, 3) + ", " + fmt(hi, 3) + "]");

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }
  function table(head, rows) {
    const t = el("table");
    const tr = el("tr");
    head.forEach((h) => tr.appendChild(el("th", {}, h)));
    t.appendChild(tr);
    for (const row of rows) {
      const r = el("tr");
      row.forEach((c) => r.appendChild(el("td", {}, String(c))));
      t.appendChild(r);
    }
    return t;
  }

  function headline() {
    const box = $("headline-cards");
    data.runs.forEach((run, i) => {
      for (const out of run.outputs) {
        const card = el("div", { class: "card", "data-run": i });
        card.appendChild(el("div", { class: "run" }, run.name + " · " + out.name));
        card.appendChild(el("div", { class: "value" }, fmt(out.mean)));
        const method = out.ci95_method ? " (" + out.ci95_method + ")" : "";
        card.appendChild(el("div", { class: "interval" },
          "95% CI " + interval(...(out.ci95 || [null, null])) + method));
        card.appendChild(el("div", { class: "run" },
          out.measured + "/" + out.attempts + " measured"));
        box.appendChild(card);
      }
      const c = run.counts;
      const card = el("div", { class: "card" });
      card.appendChild(el("div", { class: "run" }, run.name + " · attempts"));
      card.appendChild(el("div", { class: "value" }, String(c.attempts)));
      card.appendChild(el("div", { class: "run" }, Object.entries(c)
        .filter(([k]) => k !== "attempts").map(([k, v]) => k + " " + v).join(", ")));
      card.appendChild(el("div", { class: "run" }, "resolve rate " + fmt(run.resolve_rate)));
      box.appendChild(card);
    });
  }

  // pass@k (solid) and pass^k (dashed) against k, with 95% intervals as bars
  function curves() {
    const W = 720, H = 300, L = 48, R = 16, T = 12, B = 36;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id: "curves-svg",
      width: W, height: H, role: "img", "aria-label": "pass@k and pass^k" });
    const ks = [...new Set(data.runs.flatMap((r) => r.pass_at_k.map((row) => row[0])))]
      .sort((a, b) => a - b);
    const logs = ks.length > 1 && ks[ks.length - 1] / ks[0] > 8;
    const sx = (k) => {
      if (ks.length < 2) return L + (W - L - R) / 2;
      const lo = logs ? Math.log(ks[0]) : ks[0], hi = logs ? Math.log(ks[ks.length - 1])
        : ks[ks.length - 1];
      return L + ((logs ? Math.log(k) : k) - lo) / (hi - lo) * (W - L - R);
    };
    const sy = (v) => T + (1 - v) * (H - T - B);
    for (let g = 0; g <= 4; g++) {
      const y = sy(g / 4);
      chart.appendChild(svg("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#e5e8ee" }));
      const label = svg("text", { x: L - 6, y: y + 4, "text-anchor": "end",
        "font-size": 11, fill: "#5b6475" });
      label.textContent = (g / 4).toFixed(2);
      chart.appendChild(label);
    }
    for (const k of ks) {
      const label = svg("text", { x: sx(k), y: H - B + 16, "text-anchor": "middle",
        "font-size": 11, fill: "#5b6475" });
      label.textContent = "k=" + k;
      chart.appendChild(label);
    }
    data.runs.forEach((run, i) => {
      const color = COLORS[i % COLORS.length];
      [["pass_at_k", ""], ["pass_hat_k", "5 4"]].forEach(([key, dash]) => {
        const rows = run[key].filter((row) => row[1] !== null);
        if (!rows.length) return;
        const d = rows.map((row, j) => (j ? "L" : "M") + sx(row[0]) + " " + sy(row[1])).join(" ");
        chart.appendChild(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2,
          "stroke-dasharray": dash, class: "curve", "data-run": i, "data-kind": key }));
        for (const row of rows) {
          if (row[2] !== null) {
            chart.appendChild(svg("line", { x1: sx(row[0]), x2: sx(row[0]), y1: sy(row[2]),
              y2: sy(row[3]), stroke: color, "stroke-width": 1, opacity: 0.6 }));
          }
          const dot = svg("circle", { cx: sx(row[0]), cy: sy(row[1]), r: 3, fill: color });
          const title = svg("title");
          title.textContent = `${run.name} ${key.replace("_hat_", "^").replace("_at_", "@")}` +
            ` k=${row[0]}: ${fmt(row[1])} ${interval(row[2], row[3])}, ${row[4]} tasks`;
          dot.appendChild(title);
          chart.appendChild(dot);
        }
      });
    });
    $("curves").appendChild(chart);
    const legend = el("div", { class: "legend" });
    data.runs.forEach((run, i) => {
      const item = el("span");
      item.appendChild(el("span", { class: "swatch", style: "background:" +
        COLORS[i % COLORS.length] }));
      item.appendChild(document.createTextNode(run.name));
      legend.appendChild(item);
    });
    legend.appendChild(el("span", {}, "solid: pass@k · dashed: pass^k · bars: 95% CI"));
    $("curves").appendChild(legend);
  }

  function cellColor(code) {
    if (code === 255) return [246, 247, 249];
    if (code === 252) return [120, 120, 130];
    if (code === 253) return [170, 170, 180];
    if (code === 254) return [60, 60, 70];
    const t = code / 200;  // red (0) → yellow → green (1)
    return t < 0.5 ? [214, Math.round(60 + 300 * t), 60]
      : [Math.round(214 - 340 * (t - 0.5)), 200, Math.round(60 + 40 * (t - 0.5))];
  }

  // tasks (rows, by decreasing mean) × attempts (columns); many tasks share a pixel row
  function heatmaps() {
    data.runs.forEach((run, i) => {
      const h = run.heatmap;
      const box = el("div", { class: "heatmap", "data-run": i });
      box.appendChild(el("h3", {}, run.name));
      const rows = h.tasks.length, cols = Math.max(h.columns, 1);
      if (!rows) { box.appendChild(el("p", { class: "note" }, "no task")); $("heatmap").appendChild(box); return; }
      const bytes = Uint8Array.from(atob(h.cells), (c) => c.charCodeAt(0));
      const height = Math.min(rows, 600), cell = Math.max(1, Math.min(24, Math.floor(720 / cols)));
      const canvas = el("canvas", { width: cols * cell, height, id: "heatmap-" + i,
        "aria-label": "task by attempt heatmap" });
      canvas.style.width = Math.max(cols * cell, 240) + "px";
      canvas.style.height = Math.max(60, Math.min(Math.max(rows * 12, height), 600)) + "px";
      const ctx = canvas.getContext("2d");
      const image = ctx.createImageData(cols * cell, height);
      for (let y = 0; y < height; y++) {
        const first = Math.floor(y * rows / height), last = Math.max(first + 1,
          Math.floor((y + 1) * rows / height));
        for (let c = 0; c < cols; c++) {
          let r = 0, g = 0, b = 0;
          for (let t = first; t < last; t++) {
            const rgb = cellColor(bytes[t * cols + c]);
            r += rgb[0]; g += rgb[1]; b += rgb[2];
          }
          const n = last - first;
          for (let x = c * cell; x < (c + 1) * cell; x++) {
            const o = (y * cols * cell + x) * 4;
            image.data[o] = r / n; image.data[o + 1] = g / n; image.data[o + 2] = b / n;
            image.data[o + 3] = 255;
          }
        }
      }
      ctx.putImageData(image, 0, 0);
      canvas.addEventListener("mousemove", (e) => {
        const rect = canvas.getBoundingClientRect();
        const t = Math.floor((e.clientY - rect.top) / rect.height * rows);
        const a = Math.floor((e.clientX - rect.left) / rect.width * cols);
        tip(e, h.tasks[Math.min(t, rows - 1)] + ", attempt " + a);
      });
      canvas.addEventListener("mouseleave", () => { $("tip").style.display = "none"; });
      box.appendChild(canvas);
      box.appendChild(el("p", { class: "note" }, `${rows} tasks × ${h.columns} attempts` +
        (rows > height ? ` (${(rows / height).toFixed(1)} tasks per pixel row)` : "") +
        (h.hidden_attempts ? `, ${h.hidden_attempts} attempts beyond ${h.columns} not shown` : "")));
      $("heatmap").appendChild(box);
    });
    const legend = el("div", { class: "legend" });
    [[0, "reward 0"], [100, "0.5"], [200, "reward 1"], [252, "errored"],
      [253, "no verifier"], [254, "invalid"], [255, "no attempt"]].forEach(([code, label]) => {
      const item = el("span");
      item.appendChild(el("span", { class: "swatch", style: "background:rgb(" +
        cellColor(code).join(",") + ")" }));
      item.appendChild(document.createTextNode(label));
      legend.appendChild(item);
    });
    $("heatmap").appendChild(legend);
  }

  function tip(event, text) {
    const box = $("tip");
    box.textContent = text;
    box.style.display = "block";
    box.style.left = event.clientX + 12 + "px";
    box.style.top = event.clientY + 12 + "px";
  }

  function failures() {
    data.runs.forEach((run) => {
      $("failures").appendChild(el("h3", {}, run.name));
      const rows = [];
      for (const [name, n] of Object.entries(run.failures.exceptions || {})) rows.push(["exception", name, n]);
      for (const [name, n] of Object.entries(run.failures.failure_codes || {})) rows.push(["failure code", name, n]);
      if (!rows.length) { $("failures").appendChild(el("p", { class: "note" }, "no failure")); return; }
      $("failures").appendChild(table(["kind", "name", "attempts"], rows));
    });
  }

  function groups() {
    data.runs.forEach((run) => {
      $("groups").appendChild(el("h3", {}, run.name));
      const g = run.groups;
      if (!g.rows.length) { $("groups").appendChild(el("p", { class: "note" }, "no group")); return; }
      const rows = g.rows.map((row) => {
        const n = g.fields.length;
        return [...row.slice(0, n), row[n], fmt(row[n + 1]), interval(row[n + 2], row[n + 3]),
          fmt(row[n + 4])];
      });
      $("groups").appendChild(table([...g.fields, "attempts", "mean " + run.reward_key,
        "95% CI", "pass@1"], rows));
    });
  }

  // per task: mean in A (x) against mean in B (y); the diagonal is "no difference"
  function scatter(cmp, i) {
    const S = 360, P = 36;
    const canvas = el("canvas", { width: S, height: S, id: "scatter-" + i,
      "aria-label": "per-task means, A against B" });
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, S, S);
    ctx.strokeStyle = "#d8dce4"; ctx.strokeRect(P, P / 2, S - P * 1.5, S - P * 1.5);
    ctx.beginPath(); ctx.moveTo(P, S - P); ctx.lineTo(S - P / 2, P / 2); ctx.stroke();
    const lo = Math.min(0, ...cmp.points.flat()), hi = Math.max(1, ...cmp.points.flat());
    const sx = (v) => P + (v - lo) / (hi - lo) * (S - P * 1.5);
    const sy = (v) => S - P - (v - lo) / (hi - lo) * (S - P * 1.5);
    ctx.fillStyle = "rgba(47, 111, 223, 0.35)";
    let seed = 1;
    const jitter = () => { seed = (seed * 16807) % 2147483647; return (seed / 2147483647 - 0.5) * 6; };
    for (const [a, b] of cmp.points) ctx.fillRect(sx(a) + jitter() - 1.5, sy(b) + jitter() - 1.5, 3, 3);
    ctx.fillStyle = "#5b6475"; ctx.font = "11px sans-serif";
    ctx.fillText("A: " + cmp.a, P, S - 8);
    ctx.save(); ctx.translate(12, S - P); ctx.rotate(-Math.PI / 2);
    ctx.fillText("B: " + cmp.b, 0, 0); ctx.restore();
    return canvas;
  }

  // the difference and its 95% interval on a [-1, 1] axis
  function differenceBar(d, i) {
    const W = 720, H = 56, L = 20, R = 20;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", width: W, height: H,
      id: "difference-" + i, role: "img", "aria-label": "difference A − B" });
    const lo = Math.min(-1, d.ci95 ? d.ci95[0] : -1), hi = Math.max(1, d.ci95 ? d.ci95[1] : 1);
    const sx = (v) => L + (v - lo) / (hi - lo) * (W - L - R);
    chart.appendChild(svg("line", { x1: sx(lo), x2: sx(hi), y1: 28, y2: 28, stroke: "#d8dce4" }));
    chart.appendChild(svg("line", { x1: sx(0), x2: sx(0), y1: 10, y2: 46, stroke: "#5b6475" }));
    if (d.ci95) {
      chart.appendChild(svg("rect", { x: sx(d.ci95[0]), y: 20, width: Math.max(1, sx(d.ci95[1]) - sx(d.ci95[0])),
        height: 16, fill: "rgba(47, 111, 223, 0.3)", stroke: "#2f6fdf" }));
    }
    if (d.difference !== null) {
      chart.appendChild(svg("circle", { cx: sx(d.difference), cy: 28, r: 5, fill: "#2f6fdf" }));
    }
    [lo, 0, hi].forEach((v) => {
      const t = svg("text", { x: sx(v), y: 54, "text-anchor": "middle", "font-size": 11, fill: "#5b6475" });
      t.textContent = fmt(v, 2);
      chart.appendChild(t);
    });
    return chart;
  }

  function comparisons() {
    if (!data.comparisons.length) { $("comparison").hidden = true; return; }
    data.comparisons.forEach((cmp, i) => {
      const d = cmp.difference;
      const box = el("div", { class: "comparison", "data-index": i });
      box.appendChild(el("h3", {}, `A ${cmp.a}  vs  B ${cmp.b}`));
      const card = el("div", { class: "card" });
      card.appendChild(el("div", { class: "run" }, "A − B over " + d.tasks + " tasks (paired)"));
      card.appendChild(el("div", { class: "value" }, fmt(d.difference)));
      card.appendChild(el("div", { class: "interval" }, "95% CI " + interval(...(d.ci95 || [null, null])) +
        (d.ci95_method ? " (" + d.ci95_method + ")" : "") + " · p " +
        (d.p_value === null ? "—" : Number(d.p_value).toPrecision(3))));
      card.appendChild(el("div", { class: "run" }, `won ${d.won} · lost ${d.lost} · tied ${d.tied}` +
        ` · correlation ${fmt(d.correlation, 3)}` + (cmp.mcnemar ? ` · McNemar p ${Number(cmp.mcnemar.p_value).toPrecision(3)}` : "")));
      box.appendChild(card);
      box.appendChild(differenceBar(d, i));
      if (cmp.only_in_a || cmp.only_in_b) {
        box.appendChild(el("p", { class: "note" }, `left out: ${cmp.only_in_a} task(s) only in A, ${cmp.only_in_b} only in B`));
      }
      box.appendChild(scatter(cmp, i));
      box.appendChild(table(["k", "eligible tasks", "pass@k A", "pass@k B", "A − B", "95% CI (bootstrap)"],
        cmp.pass_at_k.map((r) => [r[0], r[1], fmt(r[2]), fmt(r[3]), fmt(r[4]), interval(r[5], r[6])])));
      $("comparison").appendChild(box);
    });
  }

  headline();
  curves();
  comparisons();
  heatmaps();
  failures();
  groups();
  document.documentElement.dataset.drawnMs = performance.now().toFixed(1);
  document.documentElement.dataset.ready = "1";
})();
