/* The attention explorer: a trained model's attention weights, explored on the page.
 *
 * A chapter's code cell (solutions/explorer.py) writes a <div class="attention-explorer">
 * holding its data as JSON in a <script type="application/json">: for each example (a
 * sentence or a sequence), the views (which attention of which model), each with its
 * queries, its keys and its weights [layer][head][query][key] for every combination of
 * the chapter's masks. This file turns each container into controls (example, view,
 * layer, head, masks) and a heat map drawn in SVG, at its own size (never scaled down: its
 * labels stay readable): the cells are as wide as the column allows, between CELL_MIN and
 * CELL_MAX, and write their weights when they are at least CELL_NUMBERS wide; a grid wider
 * than the column at CELL_MIN scrolls inside its frame. Pointing at a query, or moving to
 * it with the arrow keys once the grid has the focus, highlights its row and lists its
 * weights below the grid. A mask that changes no weight of the example and view shown (no
 * <pad> in the longest example, no causal mask in an encoder) is disabled, and says why.
 * Every number shown is the model's, computed by the build; nothing here computes a
 * weight.
 *
 * The page's language (<html lang>, zh-CN in the Chinese edition, book/_ext/editions.py)
 * picks the labels. Plain JavaScript, no library, nothing fetched.
 */
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const LABELS = {
    en: {
      title: "Attention explorer",
      example: "Example",
      view: "Attention",
      layer: "Layer",
      head: "Head",
      masks: "Masks",
      causal: "causal mask",
      padding: "padding mask",
      hint: "Point at a query, or move to the grid with Tab and step through the queries with the arrow keys.",
      // why a mask's box is disabled: it changes nothing that is shown
      inert: {
        padding: "(nothing to hide: this example is the longest of its batch, it has no <pad>)",
        causal: "(this attention has no causal mask: every query sees every key)",
        other: "(it changes no weight of this attention)",
      },
      views: {
        bahdanau: "Bahdanau (additive)",
        luong: "Luong (dot)",
        reverse: "reversal model",
        two_offset: "two-offset model",
        encoder: "encoder self-attention",
        decoder_self: "decoder self-attention",
        cross: "cross-attention",
      },
      grid: (view, sentence) => `${view} weights on “${sentence}”: one row per query, the arrow keys move between them`,
      describe: (view, layer, head, sentence, q, k) =>
        `Heat map of the ${view} weights, layer ${layer}, head ${head}, on “${sentence}”: ` +
        `${q} rows, one per query, and ${k} columns, one per key; the darker a cell, the more weight.`,
      // chapter 3's models: a GRU decoder attending over the encoder's states, once per step
      describeRecurrent: (view, sentence, q, k) =>
        `Heat map of the weights of the ${view} attention of a GRU encoder-decoder (one ` +
        `attention per output step, no layers or heads) on “${sentence}”: ${q} rows, one per ` +
        `digit written, and ${k} columns, one per source word; the darker a cell, the more weight.`,
      numbers: (shown) =>
        shown
          ? " Every cell writes its weight; the selected query's weights are also listed below."
          : " The cells are too narrow here to write their weights: the selected query's are listed below.",
      readout: (query, i, n, k) => `Query “${query}” (row ${i} of ${n}): its weights over the ${k} keys`,
      option: (query, weights) => `query “${query}”: ${weights}`,
      number: (n) => String(n),
    },
    zh: {
      title: "注意力查看器",
      example: "例子",
      view: "注意力",
      layer: "层",
      head: "头",
      masks: "掩码",
      causal: "因果掩码",
      padding: "填充掩码",
      hint: "把鼠标指向一个查询；或者按 Tab 键移到网格上，再用方向键逐个查询移动。",
      inert: {
        padding: "（没有可遮住的：这个例子是批次中最长的，没有 <pad>）",
        causal: "（这种注意力没有因果掩码：每个查询都看得到每个键）",
        other: "（它不改变这种注意力的任何权重）",
      },
      views: {
        bahdanau: "Bahdanau（加性注意力）",
        luong: "Luong（点积注意力）",
        reverse: "反转模型",
        two_offset: "双偏移模型",
        encoder: "编码器自注意力",
        decoder_self: "解码器自注意力",
        cross: "交叉注意力",
      },
      grid: (view, sentence) => `${view}的权重，句子“${sentence}”：每行一个查询，用方向键在行间移动`,
      describe: (view, layer, head, sentence, q, k) =>
        `${view}权重的热图，第 ${layer} 层，第 ${head} 个头，句子“${sentence}”：` +
        `${q} 行，每行一个查询；${k} 列，每列一个键；格子颜色越深，权重越大。`,
      describeRecurrent: (view, sentence, q, k) =>
        `GRU 编码器-解码器的${view}权重的热图（每个输出步一次注意力，没有层，也没有头），句子“${sentence}”：` +
        `${q} 行，每行一个写出的数字；${k} 列，每列一个源词；格子颜色越深，权重越大。`,
      numbers: (shown) =>
        shown ? "每个格子都写着它的权重；所选查询的权重也列在下方。" : "这里格子太窄，写不下权重：所选查询的权重列在下方。",
      readout: (query, i, n, k) => `查询“${query}”（第 ${i} 行，共 ${n} 行）对 ${k} 个键的权重`,
      option: (query, weights) => `查询“${query}”：${weights}`,
      number: (n) => String(n),
    },
  };
  const language = () => ((document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? "zh" : "en");

  // pixels: the grid is drawn at its own size
  const CELL_MAX = 44;
  const CELL_NUMBERS = 36; // the narrowest cell that writes "0.123" (11 px)
  const CELL_MIN = 18; // the narrowest cell: the keys' labels, at 45 degrees, stay apart
  const CELL_MIN_SHORT = 14; // ... when every key's label is one or two characters (digits)
  const CELL_H = 24;
  // chapter 3's views: a GRU decoder's attention (solutions/explorer.py, seq2seq_example)
  const RECURRENT = new Set(["bahdanau", "luong"]);
  // the queries' column: as wide as the longest query's label (12 px text: about 7 px a
  // Latin character, 12 a Chinese one), at least 24
  const labelWidth = (labels) =>
    Math.max(24, 14 + Math.max(...labels.map((l) => [...l].reduce((w, c) => w + (/\p{Script=Han}/u.test(c) ? 12 : 7.2), 0))));
  const LABEL_H = 70; // the keys' row, written at an angle

  let counter = 0;

  const element = (tag, attributes = {}, text = null) => {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== null) node.textContent = text;
    return node;
  };
  const svgElement = (tag, attributes = {}, text = null) => {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== null) node.textContent = text;
    return node;
  };
  const select = (id, label, options) => {
    const wrap = element("label", { class: "attention-explorer-control", for: id });
    wrap.append(element("span", {}, label));
    const box = element("select", { id });
    options.forEach(([value, text]) => box.append(element("option", { value }, text)));
    wrap.append(box);
    return [wrap, box];
  };
  // the weight written in a cell (3 decimals) and in the list below (4, as the data)
  const short = (w) => w.toFixed(3);
  const long = (w) => w.toFixed(4);

  class Explorer {
    constructor(root, data) {
      this.root = root;
      this.data = data;
      this.text = LABELS[language()];
      this.id = `attention-explorer-${++counter}`;
      this.state = { example: 0, view: 0, layer: 0, head: 0, query: 0 };
      this.masks = Object.fromEntries(data.masks.map((m) => [m, true]));
      this.build();
      this.render();
    }

    get example() {
      return this.data.examples[this.state.example];
    }

    get view() {
      return this.example.views[Math.min(this.state.view, this.example.views.length - 1)];
    }

    // the key of the active masks, as solutions/explorer.py's variant_key writes it
    get variant() {
      return this.data.masks.filter((m) => this.masks[m]).sort().join("+");
    }

    get weights() {
      return this.view.weights[this.variant][this.state.layer][this.state.head];
    }

    viewName(view) {
      return this.text.views[view.name] || view.name;
    }

    build() {
      const t = this.text;
      const figure = element("figure", { class: "attention-explorer-figure", "aria-labelledby": `${this.id}-title` });
      figure.append(element("p", { class: "attention-explorer-title", id: `${this.id}-title` }, t.title));
      const controls = element("div", { class: "attention-explorer-controls" });
      const examples = this.data.examples.map((e, i) => [i, e.sentence]);
      [this.exampleWrap, this.exampleBox] = select(`${this.id}-example`, t.example, examples);
      [this.viewWrap, this.viewBox] = select(`${this.id}-view`, t.view, []);
      [this.layerWrap, this.layerBox] = select(`${this.id}-layer`, t.layer, []);
      [this.headWrap, this.headBox] = select(`${this.id}-head`, t.head, []);
      controls.append(this.exampleWrap, this.viewWrap, this.layerWrap, this.headWrap);
      if (this.data.masks.length) {
        const fieldset = element("fieldset", { class: "attention-explorer-masks" });
        fieldset.append(element("legend", {}, t.masks));
        this.maskBoxes = {};
        for (const mask of this.data.masks) {
          const label = element("label", { class: "attention-explorer-mask" });
          const box = element("input", { type: "checkbox", "data-mask": mask });
          const note = element("span", {
            class: "attention-explorer-mask-note",
            id: `${this.id}-${mask}-note`,
            "data-mask": mask,
          });
          note.hidden = true;
          box.checked = true;
          box.addEventListener("change", () => {
            this.masks[mask] = box.checked;
            this.render();
          });
          label.append(box, document.createTextNode(` ${t[mask] || mask}`));
          fieldset.append(label, note);
          this.maskBoxes[mask] = [box, note];
        }
        controls.append(fieldset);
      }
      this.exampleBox.addEventListener("change", () => {
        this.state.example = Number(this.exampleBox.value);
        this.state.query = 0;
        this.render();
      });
      this.viewBox.addEventListener("change", () => {
        this.state.view = Number(this.viewBox.value);
        this.state.layer = this.state.head = this.state.query = 0;
        this.render();
      });
      this.layerBox.addEventListener("change", () => {
        this.state.layer = Number(this.layerBox.value);
        this.render();
      });
      this.headBox.addEventListener("change", () => {
        this.state.head = Number(this.headBox.value);
        this.render();
      });
      figure.append(controls);
      figure.append(element("p", { class: "attention-explorer-hint" }, t.hint));
      this.gridWrap = element("div", { class: "attention-explorer-grid" });
      figure.append(this.gridWrap);
      this.caption = element("figcaption", { class: "attention-explorer-caption", id: `${this.id}-caption` });
      this.readoutTitle = element("p", { class: "attention-explorer-readout-title", "aria-live": "polite" });
      this.readout = element("ol", { class: "attention-explorer-readout" });
      figure.append(this.readoutTitle, this.readout, this.caption);
      this.root.append(figure);
      // the cells' width follows the column's: draw again when it changes (a phone turned)
      if (typeof ResizeObserver !== "undefined") {
        new ResizeObserver(() => {
          if (this.svg && this.cellWidth() !== this.drawnCell) {
            this.draw();
            this.highlight(this.state.query);
          }
        }).observe(this.gridWrap);
      }
    }

    // the weights of the view shown with the masks ``active`` (names), every layer and head
    weightsWith(active) {
      return this.view.weights[this.data.masks.filter((m) => active.includes(m)).sort().join("+")];
    }

    // a mask that changes no weight of this example's view (the other masks as they are) is
    // disabled, with the reason written beside it
    updateMasks() {
      if (!this.maskBoxes) return;
      const view = this.view;
      const active = this.data.masks.filter((m) => this.masks[m]);
      for (const [mask, [box, note]] of Object.entries(this.maskBoxes)) {
        const on = this.weightsWith([...active.filter((m) => m !== mask), mask]);
        const off = this.weightsWith(active.filter((m) => m !== mask));
        const inert = on !== undefined && off !== undefined && JSON.stringify(on) === JSON.stringify(off);
        let reason = "other";
        if (mask === "padding" && !view.keys.includes("<pad>")) reason = "padding";
        else if (mask === "causal" && !view.causal) reason = "causal";
        box.disabled = inert;
        note.hidden = !inert;
        note.textContent = inert ? ` ${this.text.inert[reason]}` : "";
        if (inert) box.setAttribute("aria-describedby", note.id);
        else box.removeAttribute("aria-describedby");
      }
    }

    // the cells' width, in pixels, for the column the grid has
    cellWidth() {
      const keys = this.view.keys;
      const room = (this.gridWrap.clientWidth || 0) - labelWidth(this.view.queries) - 8;
      const fit = Math.floor(room / Math.max(keys.length, 1));
      const least = keys.every((k) => [...k].length <= 2) ? CELL_MIN_SHORT : CELL_MIN;
      return Math.max(least, Math.min(CELL_MAX, fit || CELL_MAX));
    }

    fill(box, options, chosen) {
      box.replaceChildren(...options.map(([value, text]) => element("option", { value }, text)));
      box.value = String(chosen);
    }

    render() {
      const view = this.view;
      const layers = view.weights[this.variant];
      this.state.view = this.example.views.indexOf(view);
      this.state.layer = Math.min(this.state.layer, layers.length - 1);
      this.state.head = Math.min(this.state.head, layers[this.state.layer].length - 1);
      this.state.query = Math.min(this.state.query, view.queries.length - 1);
      this.exampleBox.value = String(this.state.example);
      this.fill(this.viewBox, this.example.views.map((v, i) => [i, this.viewName(v)]), this.state.view);
      this.fill(this.layerBox, layers.map((_, i) => [i, this.text.number(i + 1)]), this.state.layer);
      this.fill(this.headBox, layers[0].map((_, i) => [i, this.text.number(i + 1)]), this.state.head);
      this.viewWrap.hidden = this.example.views.length < 2;
      this.layerWrap.hidden = layers.length < 2;
      this.headWrap.hidden = layers[0].length < 2;
      this.updateMasks();
      this.draw();
      this.highlight(this.state.query);
    }

    describe(numbers) {
      const view = this.view;
      const text = RECURRENT.has(view.name)
        ? this.text.describeRecurrent(this.viewName(view), this.example.sentence, view.queries.length, view.keys.length)
        : this.text.describe(
            this.viewName(view),
            this.state.layer + 1,
            this.state.head + 1,
            this.example.sentence,
            view.queries.length,
            view.keys.length,
          );
      this.caption.textContent = text + this.text.numbers(numbers);
    }

    draw() {
      const view = this.view;
      const weights = this.weights;
      const CELL_W = this.cellWidth();
      const LABEL_W = labelWidth(view.queries);
      const numbers = CELL_W >= CELL_NUMBERS;
      this.drawnCell = CELL_W;
      this.describe(numbers);
      const width = LABEL_W + CELL_W * view.keys.length + 8;
      const height = LABEL_H + CELL_H * view.queries.length + 4;
      const svg = svgElement("svg", {
        viewBox: `0 0 ${width} ${height}`,
        width: String(width),
        height: String(height),
        class: `attention-explorer-svg${numbers ? " attention-explorer-numbers" : ""}`,
        role: "listbox",
        tabindex: "0",
        "aria-label": this.text.grid(this.viewName(view), this.example.sentence),
        "aria-describedby": `${this.id}-caption`,
      });
      view.keys.forEach((key, j) => {
        const x = LABEL_W + CELL_W * (j + 0.5);
        svg.append(
          svgElement(
            "text",
            { class: "attention-explorer-key", x: String(x), y: String(LABEL_H - 6), transform: `rotate(-45 ${x} ${LABEL_H - 6})` },
            key,
          ),
        );
      });
      this.rows = view.queries.map((query, i) => {
        const y = LABEL_H + CELL_H * i;
        const row = svgElement("g", {
          class: "attention-explorer-row",
          role: "option",
          id: `${this.id}-row-${i}`,
          "data-query": String(i),
          "aria-selected": "false",
          "aria-label": this.text.option(query, view.keys.map((k, j) => `${k} ${long(weights[i][j])}`).join(", ")),
        });
        row.append(svgElement("text", { class: "attention-explorer-query", x: String(LABEL_W - 6), y: String(y + CELL_H * 0.68) }, query));
        weights[i].forEach((w, j) => {
          const x = LABEL_W + CELL_W * j;
          const cell = svgElement("rect", {
            class: "attention-explorer-cell",
            x: String(x),
            y: String(y),
            width: String(CELL_W),
            height: String(CELL_H),
            "data-key": String(j),
            "data-weight": long(w),
          });
          cell.style.fillOpacity = String(0.04 + 0.96 * w);
          const value = svgElement(
            "text",
            { class: "attention-explorer-value", x: String(x + CELL_W / 2), y: String(y + CELL_H * 0.68), "data-key": String(j) },
            short(w),
          );
          value.classList.toggle("attention-explorer-dark", w > 0.55);
          row.append(cell, value);
        });
        row.addEventListener("pointerenter", () => this.highlight(i));
        row.addEventListener("click", () => this.highlight(i));
        svg.append(row);
        return row;
      });
      svg.addEventListener("keydown", (event) => this.key(event));
      this.svg = svg;
      this.gridWrap.replaceChildren(svg);
    }

    key(event) {
      const n = this.rows.length;
      const moves = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };
      let next = null;
      if (event.key in moves) next = (this.state.query + moves[event.key] + n) % n;
      else if (event.key === "Home") next = 0;
      else if (event.key === "End") next = n - 1;
      if (next === null) return;
      event.preventDefault();
      this.highlight(next);
    }

    highlight(i) {
      const view = this.view;
      const weights = this.weights[i];
      this.state.query = i;
      this.rows.forEach((row, r) => {
        const on = r === i;
        row.classList.toggle("attention-explorer-selected", on);
        row.setAttribute("aria-selected", on ? "true" : "false");
      });
      this.svg.setAttribute("aria-activedescendant", `${this.id}-row-${i}`);
      this.root.dataset.query = String(i);
      this.readoutTitle.textContent = this.text.readout(view.queries[i], i + 1, view.queries.length, view.keys.length);
      this.readout.replaceChildren(
        ...view.keys.map((key, j) => {
          const item = element("li", { "data-key": String(j), "data-weight": long(weights[j]) });
          const bar = element("span", { class: "attention-explorer-bar", "aria-hidden": "true" });
          bar.style.width = `${(100 * weights[j]).toFixed(1)}%`;
          item.append(
            element("span", { class: "attention-explorer-readout-key" }, key),
            element("span", { class: "attention-explorer-readout-value" }, long(weights[j])),
            bar,
          );
          return item;
        }),
      );
    }
  }

  const start = () => {
    document.querySelectorAll(".attention-explorer").forEach((root) => {
      if (root.dataset.ready) return;
      const script = root.querySelector("script.attention-explorer-data");
      if (!script) return;
      root.dataset.ready = "true";
      new Explorer(root, JSON.parse(script.textContent));
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
