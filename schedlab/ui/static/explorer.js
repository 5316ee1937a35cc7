// The schedlab explorer: one anywidget ESM module. Jupyter (anywidget.AnyWidget) and Panel
// (pn.custom.AnyWidgetComponent) load this same file. It draws everything from the synced
// `state` and reports each user action by setting `action` and calling save_changes().
// Vanilla DOM, no imports, no network: the explorer must work offline and on a projector.

const TABS = [
  ["code", "Code"],
  ["script", "Script"],
  ["diff", "Diff"],
  ["compare", "Compare"],
  ["pipeline", "Pipeline"],
  ["trace", "Trace"],
  ["tune", "Tune"],
];

// One color per tuning task in the convergence chart (then they repeat).
const TASK_COLORS = ["#2f6feb", "#d62728", "#1b7f3b", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"];

// What the status line says while an action that can take seconds is on its way.
const BUSY_TEXT = {
  load_workload: (a) => `Loading workload ${a.name}…`,
  load_onnx: (a) => `Importing ${a.filename}: reading the ONNX graph, legalizing and fusing it…`,
  open_function: (a) => `Opening ${a.name}…`,
  pipeline: () => "Compiling: running the lowering pipeline pass by pass…",
  measure: () => "Measuring: compiling the kernel and timing it…",
  import_trace: (a) => `Replaying the trace ${a.filename || ""}…`,
};
const MEASURING = BUSY_TEXT.measure();
// The moving busy bar starts once an action has waited this long: a quick answer shows no
// flicker, and a page does not draw 60 frames a second for every click.
const BUSY_BAR_DELAY_MS = 300;

const KIND_BADGES = {
  parallel: "parallel",
  vectorized: "vectorized",
  unrolled: "unrolled",
  thread_binding: "thread",
};

// -- small DOM and parsing helpers ---------------------------------------------------------------
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) el.append(child);
  }
  return el;
}

// Rebuild a <select>'s options only when they differ, so an open dropdown is not disturbed.
function fillSelect(select, items, value) {
  const key = JSON.stringify(items);
  if (select.dataset.options !== key) {
    select.replaceChildren(
      ...items.map((it) => h("option", { value: it.value, disabled: it.disabled }, it.label)),
    );
    select.dataset.options = key;
  }
  if (value !== undefined && value !== null) select.value = String(value);
}

function formatSizes(sizes) {
  return Object.entries(sizes || {})
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

// "None, 16" / "4,8" / "[None 16]" -> [null, 16] / [4, 8] / [null, 16]
function parseInts(text) {
  const tokens = text.replace(/[[\]()]/g, " ").split(/[\s,]+/).filter(Boolean);
  const out = [];
  for (const token of tokens) {
    if (/^(none|null|_|\?)$/i.test(token)) out.push(null);
    else if (/^-?\d+$/.test(token)) out.push(Number.parseInt(token, 10));
    else return { error: `"${token}" is not an integer or None` };
  }
  return { value: out };
}

// Scroll `container` (not the page, not the notebook around us) so `target` is visible;
// `third` puts an out-of-view target a third of the way down, which reads better for code.
function scrollWithin(container, target, third = false) {
  if (!container || !target) return;
  const box = container.getBoundingClientRect();
  const rect = target.getBoundingClientRect();
  if (rect.top >= box.top && rect.bottom <= box.bottom) return;
  const delta = third ? rect.top - box.top - box.height / 3 : rect.top < box.top
    ? rect.top - box.top - 8 : rect.bottom - box.bottom + 8;
  container.scrollTop += delta;
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function toBase64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds >= 1) return `${seconds.toFixed(2)} s`;
  if (seconds >= 1e-3) return `${(seconds * 1e3).toFixed(2)} ms`;
  return `${(seconds * 1e6).toFixed(1)} µs`;
}

// -- the component -------------------------------------------------------------------------------
function render({ model, el }) {
  // UI state that lives only in the browser and must survive re-renders.
  const ui = {
    tab: "code",
    openPrimitive: null,
    formValues: {}, // primitive name -> {arg name -> raw field value}
    formErrors: {},
    applySeq: null, // seq of the last apply sent, to close its form once it succeeded
    diffA: null,
    diffB: null,
    measuringSince: null, // when the state first said a measurement is running
    diffFollow: true, // the Diff tab shows the previous step against the current one
    diffAsked: null, // what the Diff tab asked for last by itself (each thing once)
    compareA: null,
    compareB: null,
    pipelineRow: null,
    sizesEdited: false,
  };
  const memo = {};
  const pending = new Map(); // seq -> {t0, type}: actions waiting for their state
  let lastSeq = 0;
  let state = null;
  let nodeTypes = new Map(); // uid -> "loop" | "block", from the tree

  function changed(name, value) {
    const key = JSON.stringify(value);
    if (memo[name] === key) return false;
    memo[name] = key;
    return true;
  }

  function send(action) {
    lastSeq = Math.max(lastSeq, state?.seq || 0) + 1;
    const busy = BUSY_TEXT[action.type]?.(action) ?? null;
    pending.set(lastSeq, { t0: performance.now(), type: action.type, busy });
    root.dataset.sent = String(lastSeq); // the last action sent (its answer: data-seq >= it)
    markBusy();
    showBusy();
    model.set("action", { ...action, seq: lastSeq });
    model.save_changes();
    return lastSeq;
  }

  // The status line: what long work is going on (an action on its way, a measurement in the
  // background) and for how long; empty and hidden when nothing is. Each text shown is also
  // appended to window.__schedlabBusy (for tests: a fast import may come and go unseen).
  const busyStatus = h("span", {
    class: "sl-busy-text",
    testid: "busy",
    role: "status",
    hidden: true,
  });
  let busyShown = "";
  let busyTimer = null;
  // `sl-busy` while an action waits for its state; `sl-slow` (the moving bar) once one has
  // waited BUSY_BAR_DELAY_MS.
  let slowTimer = null;
  function markBusy() {
    const busy = pending.size > 0;
    root.classList.toggle("sl-busy", busy);
    if (busy && slowTimer === null && !root.classList.contains("sl-slow")) {
      slowTimer = setTimeout(() => {
        slowTimer = null;
        root.classList.toggle("sl-slow", pending.size > 0);
      }, BUSY_BAR_DELAY_MS);
    } else if (!busy) {
      clearTimeout(slowTimer);
      slowTimer = null;
      root.classList.remove("sl-slow");
    }
  }

  function currentBusy() {
    const waiting = [...pending.values()].filter((entry) => entry.busy);
    if (waiting.length) return { text: waiting[waiting.length - 1].busy, t0: waiting[0].t0 };
    if (state?.measurement?.status === "running") {
      ui.measuringSince ??= performance.now();
      return { text: MEASURING, t0: ui.measuringSince };
    }
    ui.measuringSince = null;
    return null;
  }
  function showBusy() {
    const busy = currentBusy();
    const text = busy?.text || "";
    if (text && text !== busyShown) {
      window.__schedlabBusy = window.__schedlabBusy || [];
      window.__schedlabBusy.push(text);
    }
    busyShown = text;
    const seconds = busy ? Math.floor((performance.now() - busy.t0) / 1000) : 0;
    busyStatus.textContent = seconds >= 1 ? `${text} ${seconds} s` : text;
    busyStatus.hidden = !text;
    if (text && busyTimer === null) busyTimer = setInterval(showBusy, 1000);
    if (!text && busyTimer !== null) {
      clearInterval(busyTimer);
      busyTimer = null;
    }
  }

  const root = h("div", { class: "sl-explorer", testid: "explorer" });
  el.append(root);

  // ---- toolbar ----
  const workloadSelect = h("select", { testid: "workload-select", title: "Workload" });
  const sizesInput = h("input", {
    type: "text",
    testid: "workload-sizes",
    placeholder: "M=1024, N=1024",
    spellcheck: "false",
    title: "Sizes: name=value, comma separated",
  });
  const loadButton = h("button", { type: "button", testid: "load-workload", class: "sl-primary" });
  loadButton.textContent = "Load";
  const onnxInput = h("input", { type: "file", accept: ".onnx", testid: "onnx-upload" });
  const targetSelect = h("select", { testid: "target-select", title: "Target" });
  const functionSelect = h("select", { testid: "function-select", title: "Function" });
  const sourceText = h("span", { class: "sl-source", testid: "source" });

  // The sizes go as typed: Python checks every field and says what is wrong with each.
  const loadWorkload = () => {
    if (!workloadSelect.value) return;
    ui.sizesEdited = false;
    send({ type: "load_workload", name: workloadSelect.value, sizes: sizesInput.value });
  };
  workloadSelect.addEventListener("change", () => {
    const entry = (state?.workloads || []).find((w) => w.name === workloadSelect.value);
    sizesInput.value = formatSizes(entry?.sizes);
    ui.sizesEdited = false;
  });
  sizesInput.addEventListener("input", () => {
    ui.sizesEdited = true;
  });
  sizesInput.addEventListener("keydown", (e) => {
    if (e.key === "Enter") loadWorkload();
  });
  loadButton.addEventListener("click", loadWorkload);
  onnxInput.addEventListener("change", async () => {
    const file = onnxInput.files?.[0];
    if (!file) return;
    const data = toBase64(await file.arrayBuffer());
    onnxInput.value = "";
    send({ type: "load_onnx", filename: file.name, data_b64: data });
  });
  targetSelect.addEventListener("change", () => {
    send({ type: "set_target", target: targetSelect.value });
  });
  functionSelect.addEventListener("change", () => {
    if (functionSelect.value) send({ type: "open_function", name: functionSelect.value });
  });

  const busyBar = h("div", { class: "sl-busybar" });
  root.append(
    h(
      "div",
      { class: "sl-toolbar" },
      h("span", { class: "sl-brand" }, "schedlab"),
      h("label", { class: "sl-field" }, "Workload", workloadSelect, sizesInput, loadButton),
      h("label", { class: "sl-file sl-button", title: "Load an ONNX model" }, "ONNX…", onnxInput),
      h("label", { class: "sl-field" }, "Target", targetSelect),
      h("label", { class: "sl-field" }, "Function", functionSelect),
      busyStatus,
      sourceText,
      busyBar,
    ),
  );

  // ---- columns ----
  const graphBody = h("div", { class: "sl-graph-body" });
  const graphBox = h(
    "details",
    { class: "sl-card sl-graph", testid: "graph", open: true },
    h("summary", {}, "Graph"),
    graphBody,
  );
  const treeBox = h("div", { class: "sl-tree", testid: "tree", role: "tree" });
  const left = h(
    "div",
    { class: "sl-col sl-left" },
    graphBox,
    h(
      "div",
      { class: "sl-card sl-tree-card" },
      h("div", { class: "sl-card-title" }, "Loops"),
      treeBox,
    ),
  );

  const paletteBox = h("div", { class: "sl-palette", testid: "palette" });
  const formBox = h("div", { class: "sl-form-box" });
  const messageBox = h("div", { class: "sl-message", testid: "message", role: "alert" });
  const predictionText = h("div", { class: "sl-pred-text", testid: "prediction" });
  const boundText = h("div", { class: "sl-bound" });
  const assumptionsTable = h("table", { class: "sl-assumptions", testid: "assumptions" });
  const assumptionsBox = h(
    "details",
    { class: "sl-assumptions-box" },
    h("summary", {}, "Assumptions"),
    assumptionsTable,
  );
  const measureButton = h("button", { type: "button", testid: "measure", class: "sl-primary" });
  measureButton.textContent = "Measure";
  measureButton.addEventListener("click", () => send({ type: "measure" }));
  const measurementText = h("span", { class: "sl-measurement", testid: "measurement" });
  const latencyChart = h("div", { class: "sl-chart" });
  const perfBox = h(
    "div",
    { class: "sl-card sl-perf" },
    h("div", { class: "sl-card-title" }, "Predicted latency"),
    predictionText,
    boundText,
    assumptionsBox,
    h("div", { class: "sl-measure-row" }, measureButton, measurementText),
    latencyChart,
  );

  const undoButton = h("button", { type: "button", testid: "undo", title: "Undo (Ctrl+Z)" });
  undoButton.textContent = "↶ Undo";
  undoButton.addEventListener("click", () => send({ type: "undo" }));
  const redoButton = h("button", { type: "button", testid: "redo", title: "Redo (Ctrl+Shift+Z)" });
  redoButton.textContent = "Redo ↷";
  redoButton.addEventListener("click", () => send({ type: "redo" }));
  const stepsList = h("ol", { class: "sl-steps", testid: "steps" });
  const branchSelect = h("select", { testid: "branch-select", title: "Branch" });
  branchSelect.addEventListener("change", () => send({ type: "switch", name: branchSelect.value }));
  const forkName = h("input", {
    type: "text",
    testid: "fork-name",
    placeholder: "new branch",
    spellcheck: "false",
  });
  const forkButton = h("button", { type: "button", testid: "fork" });
  forkButton.textContent = "Fork";
  const fork = () => {
    let name = forkName.value.trim();
    if (!name) {
      const taken = new Set(state?.branches || []);
      let i = 1;
      while (taken.has(`try${i}`)) i += 1;
      name = `try${i}`;
    }
    forkName.value = "";
    send({ type: "fork", name });
  };
  forkButton.addEventListener("click", fork);
  forkName.addEventListener("keydown", (e) => {
    if (e.key === "Enter") fork();
  });
  const historyBox = h(
    "div",
    { class: "sl-card sl-history" },
    h("div", { class: "sl-card-title" }, "Steps"),
    h("div", { class: "sl-row-buttons" }, undoButton, redoButton),
    stepsList,
    h("div", { class: "sl-branch-row" }, "Branch", branchSelect, forkName, forkButton),
  );
  const middle = h(
    "div",
    { class: "sl-col sl-middle" },
    h(
      "div",
      { class: "sl-card" },
      h("div", { class: "sl-card-title" }, "Primitives"),
      paletteBox,
      formBox,
    ),
    messageBox,
    perfBox,
    historyBox,
  );

  // ---- right column: tabs ----
  const tabButtons = {};
  const panes = {};
  for (const [name, label] of TABS) {
    tabButtons[name] = h("button", {
      type: "button",
      class: "sl-tab",
      testid: `tab-${name}`,
      role: "tab",
      onclick: () => pickTab(name),
    });
    tabButtons[name].textContent = label;
    panes[name] = h("div", { class: "sl-pane", testid: name, role: "tabpanel" });
  }
  const tabList = h("div", { class: "sl-tabs", role: "tablist" }, Object.values(tabButtons));
  const paneBox = h("div", { class: "sl-panes" }, Object.values(panes));
  const right = h("div", { class: "sl-col sl-right" }, tabList, paneBox);
  root.append(h("div", { class: "sl-main" }, left, middle, right));

  // A tab the user clicks. Python runs an extension's panel for new steps only while its tab
  // is shown, so it is told when one is shown or left (a stale panel comes back fresh).
  function pickTab(name) {
    const panel = (tab) => tab.startsWith("panel-");
    const told = panel(name) || panel(ui.tab);
    showTab(name);
    if (told && state) send({ type: "show_tab", tab: name });
  }

  function showTab(name) {
    if (!tabButtons[name]) name = "code"; // an extension's tab that has gone
    ui.tab = name;
    for (const [tab, button] of Object.entries(tabButtons)) {
      const active = tab === name;
      button.classList.toggle("active", active);
      button.setAttribute("aria-selected", String(active));
      panes[tab].hidden = !active;
    }
    scrollToHighlight(panes[name]);
    if (name === "diff") followDiff();
  }

  // Until the user picks two steps, the Diff tab shows what the current step changed: the
  // previous step against it (asked for when the tab is visible and shows something else).
  function followDiff() {
    const s = state;
    if (!s || !ui.diffFollow || panes.diff.hidden || !(s.current_step > 0)) return;
    const [a, b] = [s.current_step - 1, s.current_step];
    if (s.diff?.a === a && s.diff?.b === b) return;
    const key = JSON.stringify([s.source, s.func, s.branch, s.target, a, b]);
    if (ui.diffAsked === key) return;
    ui.diffAsked = key;
    send({ type: "diff", a, b });
  }

  // ---- code / script panes ----
  const codeHeader = h("div", { class: "sl-pane-header" });
  const codeError = h("pre", { class: "sl-pane-error" });
  const codePre = h("pre", { class: "sl-code" });
  panes.code.append(codeHeader, codeError, codePre);
  const scriptPre = h("pre", { class: "sl-code sl-script" });
  panes.script.append(scriptPre);
  scriptPre.addEventListener("click", (e) => {
    const line = e.target.closest(".sl-line");
    if (!line || !state) return;
    const number = Number(line.dataset.line);
    const uids = Object.entries(state.script?.lines || {})
      .filter(([, n]) => n === number)
      .map(([uid]) => Number(uid));
    if (!uids.length) return;
    const loop = uids.find((uid) => nodeTypes.get(uid) === "loop");
    const uid = loop ?? uids[0];
    send({ type: "select", kind: nodeTypes.get(uid) === "loop" ? "loop" : "block", uid });
  });

  function scrollToHighlight(pane) {
    if (pane && !pane.hidden) scrollWithin(pane, pane.querySelector(".sl-hl"), true);
  }

  function highlightLines(pre, wanted) {
    for (const line of pre.querySelectorAll(".sl-line")) {
      line.classList.toggle("sl-hl", wanted(Number(line.dataset.line)));
    }
  }

  // ---- diff / compare / pipeline / trace panes ----
  const diffA = h("select", { testid: "diff-a", title: "from step" });
  const diffB = h("select", { testid: "diff-b", title: "to step" });
  diffA.addEventListener("change", () => {
    ui.diffA = Number(diffA.value);
    ui.diffFollow = false;
  });
  diffB.addEventListener("change", () => {
    ui.diffB = Number(diffB.value);
    ui.diffFollow = false;
  });
  const diffRun = h("button", { type: "button", testid: "diff-run", class: "sl-primary" });
  diffRun.textContent = "Diff";
  diffRun.addEventListener("click", () => {
    send({ type: "diff", a: Number(diffA.value), b: Number(diffB.value) });
  });
  const diffPre = h("pre", { class: "sl-code sl-diff" });
  panes.diff.append(
    h("div", { class: "sl-pane-header" }, "Step", diffA, "→", diffB, diffRun),
    diffPre,
  );

  const compareA = h("select", { testid: "compare-a", title: "branch A" });
  const compareB = h("select", { testid: "compare-b", title: "branch B" });
  compareA.addEventListener("change", () => (ui.compareA = compareA.value));
  compareB.addEventListener("change", () => (ui.compareB = compareB.value));
  const compareRun = h("button", { type: "button", testid: "compare-run", class: "sl-primary" });
  compareRun.textContent = "Compare";
  compareRun.addEventListener("click", () => {
    send({ type: "compare", a: compareA.value, b: compareB.value });
  });
  const compareBody = h("div", { class: "sl-compare-body" });
  panes.compare.append(
    h("div", { class: "sl-pane-header" }, "Branch", compareA, "vs", compareB, compareRun),
    compareBody,
  );

  const pipelineRun = h("button", { type: "button", testid: "pipeline-run", class: "sl-primary" });
  pipelineRun.textContent = "Run pipeline";
  pipelineRun.addEventListener("click", () => send({ type: "pipeline" }));
  const pipelineBody = h("div", { class: "sl-pipeline-body" });
  const pipelineDetail = h("div", { class: "sl-pipeline-detail", testid: "pipeline-detail" });
  panes.pipeline.append(
    h("div", { class: "sl-pane-header" }, pipelineRun, "lowering passes, outermost first"),
    pipelineBody,
    pipelineDetail,
  );

  const exportJson = h("button", { type: "button", testid: "export-json" });
  exportJson.textContent = "Export JSON";
  const exportPython = h("button", { type: "button", testid: "export-python" });
  exportPython.textContent = "Export Python";
  const exportBundle = h("button", { type: "button", testid: "export-bundle" });
  exportBundle.textContent = "Export bundle";
  const importInput = h("input", { type: "file", accept: ".json", testid: "import-trace" });
  const tracePython = h("pre", { class: "sl-trace-python", testid: "trace-python" });
  exportJson.addEventListener("click", () => {
    const trace = state?.trace;
    if (trace) download(trace.json, trace.filename || "trace.json", "application/json");
  });
  exportPython.addEventListener("click", () => {
    const trace = state?.trace;
    if (trace) download(trace.python, pythonFilename(trace.filename), "text/x-python");
  });
  exportBundle.addEventListener("click", () => {
    const trace = state?.trace;
    if (trace?.bundle) {
      download(trace.bundle, trace.bundle_filename || "bundle.json", "application/json");
    }
  });
  importInput.addEventListener("change", async () => {
    const file = importInput.files?.[0];
    if (!file) return;
    const text = await file.text();
    importInput.value = "";
    send({ type: "import_trace", text, filename: file.name });
  });
  panes.trace.append(
    h(
      "div",
      { class: "sl-pane-header" },
      exportJson,
      exportPython,
      exportBundle,
      h(
        "label",
        { class: "sl-file sl-button", title: "Replay a trace JSON" },
        "Import…",
        importInput,
      ),
    ),
    tracePython,
  );

  // ---- tune pane: a background tuning run, its convergence and its best schedules ----
  const tuneScope = h("select", { testid: "tune-scope", title: "What to tune" });
  const tuneTarget = h("select", { testid: "tune-target", title: "Target" });
  const tuneField = (testid, title) =>
    h("input", { type: "text", testid, title, inputmode: "numeric", spellcheck: "false" });
  const tuneTrials = tuneField("tune-trials", "Trials in all (measured candidates)");
  const tuneBatch = tuneField("tune-per-batch", "Candidates built and measured per batch");
  const tuneDir = h("input", {
    type: "text",
    testid: "tune-workdir",
    placeholder: "a temporary folder",
    spellcheck: "false",
    title: "Where the run keeps its records (a folder on the server); resumable",
  });
  const tuneButton = (testid, label, primary) => {
    const button = h("button", { type: "button", testid, class: primary ? "sl-primary" : null });
    button.textContent = label;
    return button;
  };
  const tuneStart = tuneButton("tune-start", "Start", true);
  const tuneStop = tuneButton("tune-stop", "Stop");
  const tuneResume = tuneButton("tune-resume", "Resume");
  tuneStart.addEventListener("click", () => {
    send({
      type: "tune_start",
      scope: tuneScope.value || "all",
      target: tuneTarget.value,
      trials: tuneTrials.value,
      per_batch: tuneBatch.value,
      work_dir: tuneDir.value,
    });
  });
  tuneStop.addEventListener("click", () => send({ type: "tune_stop" }));
  tuneResume.addEventListener("click", () => {
    send({ type: "tune_resume", trials: tuneTrials.value, per_batch: tuneBatch.value });
  });
  const tuneStatus = h("div", { class: "sl-tune-status", testid: "tune-status", role: "status" });
  const tuneError = h("div", { class: "sl-tune-error", testid: "tune-error", role: "alert" });
  const tuneProgress = h("progress", { testid: "tune-progress", max: "1", value: "0" });
  const tuneWhere = h("div", { class: "sl-tune-where" });
  const tuneChart = h("div", { class: "sl-tune-chart", testid: "tune-chart" });
  const tuneTop = h("div", { class: "sl-tune-top", testid: "tune-top" });
  panes.tune.append(
    h(
      "div",
      { class: "sl-tune-form" },
      h("label", { class: "sl-field" }, "Tune", tuneScope),
      h("label", { class: "sl-field" }, "Target", tuneTarget),
      h("label", { class: "sl-field" }, "Trials", tuneTrials),
      h("label", { class: "sl-field" }, "per batch", tuneBatch),
      h("label", { class: "sl-field sl-tune-dir" }, "Folder", tuneDir),
      h("div", { class: "sl-row-buttons" }, tuneStart, tuneStop, tuneResume),
    ),
    tuneError,
    h("div", { class: "sl-tune-line" }, tuneProgress, tuneStatus),
    tuneWhere,
    tuneChart,
    tuneTop,
  );

  function pythonFilename(name) {
    const base = (name || "trace.json").replace(/\.json$/i, "");
    return `${base}.py`;
  }

  function download(text, filename, mime) {
    const url = URL.createObjectURL(new Blob([text], { type: mime }));
    const link = h("a", { href: url, download: filename, hidden: true });
    root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  }

  // ---- graph clicks ----
  graphBody.addEventListener("click", (e) => {
    const node = e.target.closest("g.node");
    if (!node) return;
    e.preventDefault(); // Graphviz URL attributes become <a> links: do not navigate
    if (node.id.startsWith("fn:")) send({ type: "open_function", name: node.id.slice(3) });
    else if (node.id.startsWith("block:")) {
      send({ type: "select", kind: "block", uid: Number(node.id.slice(6)) });
    }
  });

  // ---- keyboard: undo / redo when the focus is in the explorer but not in a field ----
  root.addEventListener("keydown", (e) => {
    if (!(e.ctrlKey || e.metaKey) || /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
    const key = e.key.toLowerCase();
    const redo = key === "y" || (key === "z" && e.shiftKey);
    if (key !== "z" && key !== "y") return;
    e.preventDefault();
    e.stopPropagation();
    if (redo && state?.can_redo) send({ type: "redo" });
    else if (!redo && state?.can_undo) send({ type: "undo" });
  });

  // ---- section renderers ----
  function renderToolbar(s) {
    const workloads = s.workloads || [];
    const loaded = /^workload\s+(\w+)\((.*)\)/.exec(s.source || "");
    const current = workloadSelect.value || loaded?.[1] || workloads[0]?.name;
    fillSelect(
      workloadSelect,
      workloads.map((w) => ({ value: w.name, label: w.name })),
      workloads.some((w) => w.name === current) ? current : workloads[0]?.name,
    );
    if (!ui.sizesEdited) {
      const entry = workloads.find((w) => w.name === workloadSelect.value);
      const sameAsLoaded = loaded && loaded[1] === workloadSelect.value;
      sizesInput.value = sameAsLoaded ? loaded[2] : formatSizes(entry?.sizes);
    }
    fillSelect(
      targetSelect,
      (s.targets || []).map((t) => ({ value: t, label: t })),
      s.target,
    );
    const functions = s.functions || [];
    const options = functions.map((f) => ({
      value: f.name,
      label: f.kind === "PrimFunc" ? f.name : `${f.name} (${f.kind})`,
      disabled: f.kind !== "PrimFunc",
    }));
    if (!s.func) options.unshift({ value: "", label: functions.length ? "— open —" : "—" });
    fillSelect(functionSelect, options, s.func || "");
    functionSelect.disabled = !functions.length;
    sourceText.textContent = s.source || "nothing loaded";
    sourceText.title = s.source || "";
  }

  function renderGraph(s) {
    let svg = s.graph_svg || "";
    const start = svg.indexOf("<svg");
    if (start > 0) svg = svg.slice(start); // drop Graphviz's XML prolog and DOCTYPE
    graphBox.hidden = !svg;
    graphBody.innerHTML = svg;
  }

  function markGraphSelection(s) {
    for (const node of graphBody.querySelectorAll("g.node.sl-graph-selected")) {
      node.classList.remove("sl-graph-selected");
    }
    const block = s.selection?.block;
    if (block === null || block === undefined) return;
    graphBody.querySelector(`g.node[id="block:${block}"]`)?.classList.add("sl-graph-selected");
  }

  function renderTree(s, messageChanged) {
    const selection = s.selection || {};
    const offending = new Set(s.message?.uids || []);
    nodeTypes = new Map();
    const build = (node) => {
      nodeTypes.set(node.uid, node.type);
      const isLoop = node.type === "loop";
      const selected = isLoop ? selection.loop === node.uid : selection.block === node.uid;
      const classes = ["sl-node", isLoop ? "sl-loop" : "sl-block"];
      if (selected) classes.push("selected");
      if (offending.has(node.uid)) classes.push("offending");
      const parts = [];
      if (isLoop) {
        parts.push(h("span", { class: "sl-kw" }, "for"));
        parts.push(h("span", { class: "sl-name" }, node.name));
        parts.push(h("span", { class: "sl-extent" }, `in ${node.extent}`));
        const badge = KIND_BADGES[node.kind];
        if (badge) {
          const label = node.thread ? `${badge} ${node.thread}` : badge;
          parts.push(h("span", { class: `sl-badge sl-badge-${node.kind}` }, label));
        } else if (node.thread) {
          parts.push(h("span", { class: "sl-badge sl-badge-thread_binding" }, node.thread));
        }
      } else {
        parts.push(h("span", { class: "sl-kw" }, "block"));
        parts.push(h("span", { class: "sl-name" }, node.name));
        if (node.iters) parts.push(h("span", { class: "sl-iters" }, node.iters));
      }
      for (const [key, value] of Object.entries(node.annotations || {})) {
        parts.push(h("span", { class: "sl-ann", title: `${key} = ${value}` }, `${key}=${value}`));
      }
      const row = h(
        "div",
        {
          class: classes.join(" "),
          "data-uid": node.uid,
          "data-name": node.name,
          tabindex: 0,
          role: "treeitem",
          "aria-selected": String(selected),
        },
        parts,
      );
      const select = () => send({ type: "select", kind: node.type, uid: node.uid });
      row.addEventListener("click", select);
      row.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          select();
        }
      });
      const kids = (node.children || []).map(build);
      return h(
        "div",
        { class: "sl-subtree" },
        row,
        kids.length ? h("div", { class: "sl-children", role: "group" }, kids) : null,
      );
    };
    const nodes = (s.tree || []).map(build);
    if (nodes.length) treeBox.replaceChildren(...nodes);
    else {
      const hint = s.func ? "This function has no loops." : "Load a workload to see its loops.";
      treeBox.replaceChildren(h("div", { class: "sl-empty" }, hint));
    }
    const target = messageChanged
      ? treeBox.querySelector(".sl-node.offending")
      : treeBox.querySelector(".sl-node.selected");
    scrollWithin(treeBox, target);
  }

  function renderPalette(s) {
    const palette = s.palette || [];
    if (!palette.some((p) => p.name === ui.openPrimitive)) ui.openPrimitive = null;
    if (!palette.length) {
      const hint = "Select a loop or a block to see the primitives that apply to it.";
      paletteBox.replaceChildren(h("div", { class: "sl-empty" }, hint));
      return;
    }
    paletteBox.replaceChildren(
      ...palette.map((p) =>
        h(
          "button",
          {
            type: "button",
            class: `sl-prim${p.name === ui.openPrimitive ? " active" : ""}`,
            testid: `prim-${p.name}`,
            title: p.doc || p.name,
            onclick: () => {
              ui.openPrimitive = ui.openPrimitive === p.name ? null : p.name;
              renderPalette(state);
              renderForm(state);
              formBox.querySelector("input, select")?.focus();
            },
          },
          p.name,
        ),
      ),
    );
  }

  // The raw value a field starts with: the declared default, or what the selection suggests.
  function initialRaw(arg) {
    const d = arg.default;
    switch (arg.kind) {
      case "loops":
        return Array.isArray(d) ? d.slice() : [];
      case "bool":
        return Boolean(d);
      case "choice":
        return d ?? arg.choices?.[0] ?? "";
      case "ints":
        return Array.isArray(d) ? d.map((v) => (v === null ? "None" : String(v))).join(", ") : "";
      case "any":
        return d === null || d === undefined ? "" : typeof d === "string" ? d : JSON.stringify(d);
      default:
        return d === null || d === undefined ? "" : String(d);
    }
  }

  function optional() {
    return h("em", {}, " (optional)");
  }

  function argField(arg, values, s) {
    const id = `arg-${arg.name}`;
    const set = (value) => {
      values[arg.name] = value;
    };
    const raw = values[arg.name];
    if (arg.kind === "loop" || arg.kind === "block") {
      const choices = arg.kind === "loop" ? s.loop_choices || [] : s.block_choices || [];
      const select = h(
        "select",
        { testid: id },
        h("option", { value: "" }, arg.required ? "— choose —" : "—"),
        choices.map((c) => h("option", { value: String(c.uid) }, c.name)),
      );
      select.value = choices.some((c) => String(c.uid) === raw) ? raw : "";
      set(select.value);
      select.addEventListener("change", () => set(select.value));
      return select;
    }
    if (arg.kind === "loops") {
      const known = new Set((s.loop_choices || []).map((c) => c.uid));
      const order = raw.filter((uid) => known.has(uid));
      set(order);
      const summary = h("div", { class: "sl-order" });
      const box = h("div", { class: "sl-loops", testid: id, role: "group" });
      const badges = new Map();
      const refresh = () => {
        for (const [uid, badge] of badges) {
          const at = order.indexOf(uid);
          badge.textContent = at >= 0 ? String(at + 1) : "";
        }
        const names = order.map((uid) => s.loop_choices.find((c) => c.uid === uid)?.name);
        summary.textContent = names.length ? `order: ${names.join(", ")}` : "click loops in order";
      };
      for (const choice of s.loop_choices || []) {
        const check = h("input", { type: "checkbox", value: String(choice.uid) });
        check.checked = order.includes(choice.uid);
        check.addEventListener("change", () => {
          const at = order.indexOf(choice.uid);
          if (check.checked && at < 0) order.push(choice.uid);
          if (!check.checked && at >= 0) order.splice(at, 1);
          refresh();
        });
        const badge = h("span", { class: "sl-order-badge" });
        badges.set(choice.uid, badge);
        box.append(h("label", { class: "sl-loop-choice" }, check, badge, choice.name));
      }
      refresh();
      return h("div", {}, box, summary);
    }
    if (arg.kind === "bool") {
      const check = h("input", { type: "checkbox", testid: id });
      check.checked = Boolean(raw);
      check.addEventListener("change", () => set(check.checked));
      return check;
    }
    if (arg.kind === "choice") {
      const select = h(
        "select",
        { testid: id },
        (arg.choices || []).map((c) => h("option", { value: String(c) }, String(c))),
      );
      select.value = String(raw);
      select.addEventListener("change", () => set(select.value));
      return select;
    }
    const placeholder = { ints: "None, 16", int: "0", any: "JSON or text" }[arg.kind] || "";
    const input = h("input", { type: "text", testid: id, placeholder, spellcheck: "false" });
    input.value = raw;
    input.addEventListener("input", () => set(input.value));
    return input;
  }

  function renderForm(s) {
    const prim = (s.palette || []).find((p) => p.name === ui.openPrimitive);
    if (!prim) {
      formBox.replaceChildren();
      formBox.hidden = true;
      return;
    }
    formBox.hidden = false;
    const values = (ui.formValues[prim.name] ||= {});
    const errors = ui.formErrors[prim.name] || {};
    const rows = prim.args.map((arg) => {
      if (values[arg.name] === undefined) values[arg.name] = initialRaw(arg);
      const field = argField(arg, values, s);
      const error = errors[arg.name];
      return h(
        "div",
        { class: `sl-arg${error ? " sl-invalid" : ""}`, title: arg.help || "" },
        h("span", { class: "sl-arg-name" }, arg.name, arg.required ? "" : optional()),
        field,
        arg.help ? h("span", { class: "sl-arg-help" }, arg.help) : null,
        error ? h("span", { class: "sl-arg-error" }, error) : null,
      );
    });
    const applyButton = h("button", { type: "submit", testid: "apply", class: "sl-primary" });
    applyButton.textContent = `Apply ${prim.name}`;
    const cancel = h("button", {
      type: "button",
      onclick: () => {
        ui.openPrimitive = null;
        renderPalette(state);
        renderForm(state);
      },
    });
    cancel.textContent = "Cancel";
    const on = prim.target === "block" ? "the selected block" : "the selected loop";
    const form = h(
      "form",
      { class: "sl-form", testid: "primitive-form" },
      h("div", { class: "sl-form-title" }, h("strong", {}, prim.name), ` on ${on}`),
      prim.doc ? h("div", { class: "sl-form-doc" }, prim.doc) : null,
      rows.length ? rows : h("div", { class: "sl-empty" }, "No arguments."),
      h("div", { class: "sl-row-buttons" }, applyButton, cancel),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submitForm(prim, values);
    });
    form.addEventListener("keydown", (e) => {
      // Enter submits from any field (text boxes do it natively; selects/checkboxes do not).
      if (e.key === "Enter" && e.target.tagName !== "BUTTON" && e.target.type !== "text") {
        e.preventDefault();
        submitForm(prim, values);
      }
    });
    formBox.replaceChildren(form);
  }

  // Form raw value -> the action's value, following the contract's per-kind rules.
  function argValue(arg, raw) {
    const empty = raw === "" || (Array.isArray(raw) && raw.length === 0);
    if (empty) return arg.required ? { error: "required" } : { omit: true };
    let value;
    switch (arg.kind) {
      case "loop":
      case "block":
        value = Number(raw);
        break;
      case "loops":
        value = raw.slice();
        break;
      case "int":
        if (!/^\s*-?\d+\s*$/.test(raw)) return { error: "an integer" };
        value = Number.parseInt(raw, 10);
        break;
      case "ints": {
        const parsed = parseInts(raw);
        if (parsed.error) return parsed;
        value = parsed.value;
        break;
      }
      case "bool":
        value = Boolean(raw);
        break;
      case "any":
        try {
          value = JSON.parse(raw);
        } catch {
          value = raw;
        }
        break;
      default:
        value = String(raw);
    }
    // An optional argument left at its default is omitted: Python fills the same default.
    if (!arg.required && sameJson(value, arg.default)) return { omit: true };
    return { value };
  }

  function submitForm(prim, values) {
    const args = {};
    const errors = {};
    for (const arg of prim.args) {
      const result = argValue(arg, values[arg.name]);
      if (result.error) errors[arg.name] = result.error;
      else if (!result.omit) args[arg.name] = result.value;
    }
    ui.formErrors[prim.name] = errors;
    if (Object.keys(errors).length) {
      renderForm(state);
      return;
    }
    ui.applySeq = send({ type: "apply", primitive: prim.name, args });
  }

  function renderMessage(s) {
    const message = s.message;
    messageBox.hidden = !message;
    if (!message) {
      messageBox.replaceChildren();
      return;
    }
    messageBox.className = `sl-message sl-${message.level === "error" ? "error" : "info"}`;
    const dismiss = h("button", {
      type: "button",
      class: "sl-dismiss",
      testid: "dismiss",
      title: "Dismiss",
      "aria-label": "Dismiss",
      onclick: () => send({ type: "dismiss" }),
    });
    dismiss.textContent = "×";
    const parts = [
      dismiss,
      h("div", { class: "sl-message-title" }, message.level === "error" ? "Error" : "Note"),
      h("pre", { class: "sl-message-text", testid: "message-text" }, message.text),
    ];
    // The cause first; the function it is about (long) folded under it.
    if (message.detail) {
      parts.push(
        h(
          "details",
          { class: "sl-message-detail", testid: "message-detail" },
          h("summary", {}, "The function, with what this is about marked ^^^"),
          h("pre", {}, message.detail),
        ),
      );
    }
    messageBox.replaceChildren(...parts);
  }

  function renderPerf(s) {
    const prediction = s.prediction || {};
    predictionText.textContent = prediction.text || "–";
    predictionText.classList.toggle("sl-unavailable", !prediction.available);
    boundText.textContent = prediction.bound ? `bound: ${prediction.bound}` : "";
    const rows = prediction.assumptions || [];
    assumptionsTable.replaceChildren(
      ...rows.map(([key, value]) => h("tr", {}, h("th", {}, key), h("td", {}, value))),
    );
    assumptionsBox.hidden = !rows.length;
    const measurement = s.measurement || { status: "none", text: "" };
    const running = measurement.status === "running";
    measureButton.disabled = running || !s.func;
    measureButton.textContent = running ? "Measuring…" : "Measure";
    measurementText.textContent = measurement.text || (running ? "running…" : "");
    measurementText.className = `sl-measurement sl-${measurement.status}`;
    renderChart(s.latency || []);
  }

  // A small predicted-vs-measured latency chart over the steps (log scale when it spans a lot).
  function renderChart(points) {
    const values = points.flatMap((p) => [p.predicted, p.measured]).filter((v) => v > 0);
    if (points.length < 2 || !values.length) {
      latencyChart.replaceChildren();
      return;
    }
    const width = 300;
    const height = 64;
    const pad = 6;
    const [min, max] = [Math.min(...values), Math.max(...values)];
    let [lo, hi] = [min, max];
    const log = hi / lo > 20;
    const f = (v) => (log ? Math.log10(v) : v);
    [lo, hi] = [f(lo), f(hi)];
    if (hi === lo) [lo, hi] = [lo - 1, hi + 1];
    const x = (i) => pad + (i * (width - 60 - 2 * pad)) / (points.length - 1);
    const y = (v) => height - pad - ((f(v) - lo) * (height - 2 * pad)) / (hi - lo);
    const path = (key) => {
      const at = (p, i) => `${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`;
      return points.map((p, i) => (p[key] > 0 ? at(p, i) : null)).filter(Boolean).join(" ");
    };
    const dots = (key) =>
      points
        .map((p, i) =>
          p[key] > 0
            ? `<circle class="sl-${key}" cx="${x(i).toFixed(1)}" ` +
              `cy="${y(p[key]).toFixed(1)}" r="3"><title>step ${p.step} ` +
              `${escapeText(p.label)}: ${formatSeconds(p[key])}</title></circle>`
            : "",
        )
        .join("");
    latencyChart.innerHTML =
      `<svg viewBox="0 0 ${width} ${height}" role="img" aria-label="latency per step">` +
      `<text class="sl-axis" x="${width - 2}" y="10">${formatSeconds(max)}</text>` +
      `<text class="sl-axis" x="${width - 2}" y="${height - 2}">${formatSeconds(min)}</text>` +
      `<polyline class="sl-predicted" points="${path("predicted")}"/>` +
      `<polyline class="sl-measured" points="${path("measured")}"/>${dots("predicted")}` +
      `${dots("measured")}</svg><div class="sl-legend"><span class="sl-predicted">predicted` +
      `</span> <span class="sl-measured">measured</span>${log ? " (log scale)" : ""}</div>`;
  }

  function escapeText(text) {
    const span = document.createElement("span");
    span.textContent = text ?? "";
    return span.innerHTML;
  }

  function renderHistory(s) {
    undoButton.disabled = !s.can_undo;
    redoButton.disabled = !s.can_redo;
    stepsList.replaceChildren(
      ...(s.steps || []).map((step) => {
        const current = step.index === s.current_step;
        const item = h(
          "li",
          {
            class: `sl-step${current ? " current" : ""}`,
            testid: `step-${step.index}`,
            title: current
              ? "current step: diff it against the previous one"
              : "diff this step against the current one",
            "aria-current": current ? "step" : null,
          },
          h("span", { class: "sl-step-index" }, String(step.index)),
          h("span", { class: "sl-step-label" }, step.label),
        );
        item.addEventListener("click", () => {
          ui.diffFollow = current; // the current step: what it changed (see followDiff)
          if (current) ui.diffAsked = null;
          else {
            ui.diffA = step.index;
            ui.diffB = s.current_step;
            send({ type: "diff", a: step.index, b: s.current_step });
          }
          renderDiffControls(state);
          pickTab("diff");
        });
        return item;
      }),
    );
    scrollWithin(stepsList, stepsList.querySelector(".current"));
    fillSelect(
      branchSelect,
      (s.branches || []).map((b) => ({ value: b, label: b })),
      s.branch,
    );
    branchSelect.disabled = !(s.branches || []).length;
  }

  function renderDiffControls(s) {
    const steps = s.steps || [];
    const valid = (i) => steps.some((step) => step.index === i);
    const current = s.current_step ?? 0;
    if (ui.diffFollow) [ui.diffA, ui.diffB] = [Math.max(0, current - 1), current];
    else if (s.diff && changed("diff-picked", [s.diff.a, s.diff.b])) {
      [ui.diffA, ui.diffB] = [s.diff.a, s.diff.b];
    }
    if (!valid(ui.diffA)) ui.diffA = Math.max(0, current - 1);
    if (!valid(ui.diffB)) ui.diffB = current;
    const options = steps.map((step) => ({
      value: step.index,
      label: `${step.index}: ${step.label}`,
    }));
    fillSelect(diffA, options, ui.diffA);
    fillSelect(diffB, options, ui.diffB);
  }

  function renderDiff(s) {
    if (!s.diff) {
      diffPre.replaceChildren(h("span", { class: "sl-empty" }, "Pick two steps and press Diff."));
    } else if (!s.diff.html) {
      const same = "The two steps give the same script.";
      diffPre.replaceChildren(h("span", { class: "sl-empty" }, same));
    } else {
      diffPre.innerHTML = s.diff.html;
    }
  }

  function renderCompare(s) {
    const branches = s.branches || [];
    if (!branches.includes(ui.compareA)) ui.compareA = s.compare?.a ?? branches[0] ?? null;
    if (!branches.includes(ui.compareB)) {
      ui.compareB = s.compare?.b ?? branches.find((b) => b !== ui.compareA) ?? branches[0] ?? null;
    }
    const options = branches.map((b) => ({ value: b, label: b }));
    fillSelect(compareA, options, ui.compareA);
    fillSelect(compareB, options, ui.compareB);
    compareRun.disabled = branches.length < 1;
    const compare = s.compare;
    if (!compare) {
      const hint = "Fork a branch, schedule it differently, then compare the two.";
      compareBody.replaceChildren(h("div", { class: "sl-empty" }, hint));
      return;
    }
    const names = [compare.a, compare.b];
    const table = h(
      "table",
      { class: "sl-table" },
      h("tr", {}, h("th", {}, "branch"), h("th", {}, "predicted"), h("th", {}, "measured")),
      names.map((b) =>
        h(
          "tr",
          {},
          h("td", {}, b),
          h("td", {}, compare.predicted?.[b] ?? "–"),
          h("td", {}, compare.measured?.[b] ?? "–"),
        ),
      ),
    );
    const pre = h("pre", { class: "sl-code sl-diff" });
    pre.innerHTML = compare.html || "";
    compareBody.replaceChildren(table, pre);
  }

  function renderPipeline(s) {
    const pipeline = s.pipeline;
    if (!pipeline) {
      ui.pipelineRow = null;
      const hint = "Run the lowering pipeline on the current step to see what each pass does.";
      pipelineBody.replaceChildren(h("div", { class: "sl-empty" }, hint));
      pipelineDetail.replaceChildren();
      return;
    }
    if (ui.pipelineRow !== null && ui.pipelineRow >= pipeline.length) ui.pipelineRow = null;
    const rows = pipeline.map((pass, i) => {
      const row = h(
        "tr",
        {
          class: ["sl-pass", pass.changed && "sl-changed", i === ui.pipelineRow && "selected"]
            .filter(Boolean)
            .join(" "),
          testid: "pipeline-row",
          tabindex: 0,
        },
        h("td", { style: `padding-left: ${0.5 + pass.depth * 1.2}em` }, pass.name),
        h("td", { class: "sl-num" }, (pass.seconds * 1e3).toFixed(2)),
        h("td", { class: "sl-center" }, pass.changed ? "✓" : ""),
      );
      const open = () => {
        ui.pipelineRow = i;
        renderPipeline(state);
      };
      row.addEventListener("click", open);
      row.addEventListener("keydown", (e) => {
        if (e.key === "Enter") open();
      });
      return row;
    });
    pipelineBody.replaceChildren(
      h(
        "table",
        { class: "sl-table sl-pipeline" },
        h("tr", {}, h("th", {}, "pass"), h("th", {}, "ms"), h("th", {}, "changed")),
        rows,
      ),
    );
    const pass = pipeline[ui.pipelineRow];
    if (!pass) {
      const hint = "Click a pass to see its input and output.";
      pipelineDetail.replaceChildren(h("div", { class: "sl-empty" }, hint));
      return;
    }
    pipelineDetail.replaceChildren(
      side(`before ${pass.name}`, pass.before),
      side(`after ${pass.name}`, pass.after),
    );
  }

  function side(title, text) {
    return h(
      "div",
      { class: "sl-side" },
      h("div", { class: "sl-side-title" }, title),
      h("pre", { text }),
    );
  }

  function renderTrace(s) {
    const trace = s.trace || { json: "", python: "", filename: "trace.json" };
    tracePython.textContent = trace.python || "";
    exportJson.disabled = !trace.json;
    exportPython.disabled = !trace.python;
    exportJson.title = `download ${trace.filename || "trace.json"}`;
    exportPython.title = `download ${pythonFilename(trace.filename)}`;
    exportBundle.disabled = !trace.bundle;
    exportBundle.title = trace.bundle
      ? `download ${trace.bundle_filename} (schedlab apply rebuilds the kernel from it)`
      : trace.bundle_error || "no bundle";
  }

  // Extensions' tabs (state.panels): plain text each, after the built-in tabs; a panel with
  // nothing to show for the open function has no tab.
  function renderPanels(s) {
    const wanted = new Map((s.panels || []).map((p) => [`panel-${p.name}`, p]));
    for (const name of Object.keys(tabButtons)) {
      if (!name.startsWith("panel-") || wanted.has(name)) continue;
      tabButtons[name].remove();
      panes[name].remove();
      delete tabButtons[name];
      delete panes[name];
    }
    for (const [name, panel] of wanted) {
      if (!tabButtons[name]) {
        tabButtons[name] = h("button", {
          type: "button",
          class: "sl-tab",
          testid: `tab-${name}`,
          role: "tab",
          onclick: () => pickTab(name),
        });
        panes[name] = h("div", { class: "sl-pane", testid: name, role: "tabpanel" });
        tabList.append(tabButtons[name]);
        paneBox.append(panes[name]);
      }
      tabButtons[name].textContent = panel.title;
      const error = h("pre", { class: "sl-pane-error" });
      error.textContent = panel.error || "";
      error.hidden = !panel.error;
      const text = h("pre", { class: "sl-code" });
      text.textContent = panel.text || "";
      if (panel.stale) {
        text.replaceChildren(h("span", { class: "sl-empty" }, "Updating for this step…"));
      }
      panes[name].replaceChildren(error, text);
    }
    showTab(ui.tab);
  }

  function renderTune(s) {
    const t = s.tune || {};
    const running = Boolean(t.running);
    fillSelect(
      tuneScope,
      (t.scopes || []).map((c) => ({ value: c.value, label: c.label })),
      tuneScope.value || t.scopes?.[0]?.value,
    );
    fillSelect(
      tuneTarget,
      (s.tune_targets || s.targets || []).map((name) => ({ value: name, label: name })),
      tuneTarget.value || t.run?.target || s.target,
    );
    // The fields keep what the user typed; they start from the last run's settings.
    if (!tuneTrials.value) tuneTrials.value = String(t.trials ?? 64);
    if (!tuneBatch.value) tuneBatch.value = String(t.per_batch ?? 16);
    for (const field of [tuneScope, tuneTarget, tuneTrials, tuneBatch, tuneDir]) {
      field.disabled = running;
    }
    tuneStart.disabled = running || !(t.scopes || []).length;
    tuneStop.disabled = !t.can_stop;
    tuneResume.disabled = !t.can_resume;
    tuneError.textContent = t.error || "";
    tuneError.hidden = !t.error;
    tuneStatus.textContent = t.text || "";
    tuneStatus.className = `sl-tune-status sl-${t.status || "idle"}`;
    const progress = t.progress || { trial: 0, trials: 0 };
    tuneProgress.max = Math.max(progress.trials, 1);
    tuneProgress.value = Math.min(progress.trial, progress.trials);
    tuneProgress.hidden = !t.run;
    tuneWhere.textContent = t.run
      ? `${t.run.what} · ${t.run.target} · records in ${t.run.work_dir}`
      : "Tuning measures candidate schedules in the background; the best open as branches.";
    const label = running ? `Tune ${progress.trial}/${progress.trials}` : "Tune";
    tabButtons.tune.textContent = label;
    tabButtons.tune.classList.toggle("sl-running", running);
    renderTuneChart(t.tasks || [], progress.trials);
    renderTuneTop(t);
  }

  // Best latency so far against the task's trial count, one step line per task (log y when
  // it spans a lot: early candidates are often 100x slower than the last ones).
  function renderTuneChart(tasks, budget) {
    const lines = tasks.filter((task) => (task.points || []).length);
    if (!lines.length) {
      const hint = tasks.length ? "Waiting for the first measured candidate…" : "";
      tuneChart.replaceChildren(hint ? h("div", { class: "sl-empty" }, hint) : "");
      return;
    }
    const [width, height, left, right, top, bottom] = [560, 200, 64, 12, 10, 26];
    const values = lines.flatMap((task) => task.points.map((p) => p[1]));
    const [min, max] = [Math.min(...values), Math.max(...values)];
    const log = max / min > 20;
    const f = (v) => (log ? Math.log10(v) : v);
    let [lo, hi] = [f(min), f(max)];
    if (hi === lo) [lo, hi] = [lo - (log ? 0.1 : lo * 0.1 || 1), hi + (log ? 0.1 : hi * 0.1 || 1)];
    const xMax = Math.max(budget, ...lines.map((task) => task.trials), 1);
    const x = (trial) => left + (trial * (width - left - right)) / xMax;
    const y = (v) => top + ((hi - f(v)) * (height - top - bottom)) / (hi - lo);
    const svg = [
      `<svg viewBox="0 0 ${width} ${height}" role="img" aria-label="best latency per trial">`,
      `<line class="sl-axis-line" x1="${left}" y1="${height - bottom}" x2="${width - right}" ` +
        `y2="${height - bottom}"/>`,
      `<line class="sl-axis-line" x1="${left}" y1="${top}" x2="${left}" y2="${height - bottom}"/>`,
      `<text class="sl-axis" x="${left - 4}" y="${top + 8}">${formatSeconds(max)}</text>`,
      `<text class="sl-axis" x="${left - 4}" y="${height - bottom}">${formatSeconds(min)}</text>`,
      `<text class="sl-axis sl-x" x="${left}" y="${height - 8}">0</text>`,
      `<text class="sl-axis sl-x" x="${width - right}" y="${height - 8}">${xMax}</text>`,
      `<text class="sl-axis sl-x" x="${(left + width) / 2}" y="${height - 8}">trial</text>`,
    ];
    lines.forEach((task, i) => {
      const color = TASK_COLORS[i % TASK_COLORS.length];
      const steps = [];
      task.points.forEach(([trial, best], k) => {
        if (k) steps.push(`${x(trial).toFixed(1)},${y(task.points[k - 1][1]).toFixed(1)}`);
        steps.push(`${x(trial).toFixed(1)},${y(best).toFixed(1)}`);
      });
      const last = task.points[task.points.length - 1][1];
      steps.push(`${x(task.trials).toFixed(1)},${y(last).toFixed(1)}`);
      svg.push(
        `<polyline class="sl-tune-line-${i}" stroke="${color}" points="${steps.join(" ")}"/>`,
      );
      for (const [trial, best] of task.points) {
        svg.push(
          `<circle fill="${color}" cx="${x(trial).toFixed(1)}" cy="${y(best).toFixed(1)}" ` +
            `r="3"><title>${escapeText(task.name)}, trial ${trial}: ` +
            `${formatSeconds(best)}</title></circle>`,
        );
      }
    });
    svg.push("</svg>");
    const legend = lines.map((task, i) =>
      h(
        "span",
        { class: "sl-tune-key", style: `color: ${TASK_COLORS[i % TASK_COLORS.length]}` },
        `${task.name}: ${task.best}`,
        task.gflops ? ` (${task.gflops.toFixed(1)} GFLOP/s)` : "",
      ),
    );
    const chart = h("div", { class: "sl-tune-svg" });
    chart.innerHTML = svg.join("");
    tuneChart.replaceChildren(
      h("div", { class: "sl-card-title" }, "Best latency so far"),
      chart,
      h("div", { class: "sl-legend" }, legend, log ? " (log scale)" : ""),
    );
  }

  function renderTuneTop(t) {
    const top = t.top || [];
    if (!top.length) {
      tuneTop.replaceChildren();
      return;
    }
    const several = (t.tasks || []).length > 1;
    const rows = top.map((entry) => {
      const open = h("button", {
        type: "button",
        testid: "tune-open",
        title: "Open this schedule in the explorer as a new branch",
        onclick: () => send({ type: "tune_open", task: entry.task, candidate: entry.candidate }),
      });
      open.textContent = "Open";
      return h(
        "tr",
        { testid: "tune-top-row" },
        h("td", { class: "sl-num" }, `#${entry.rank}`),
        several ? h("td", {}, entry.task) : null,
        h("td", { class: "sl-num" }, entry.text),
        h("td", { class: "sl-num" }, entry.gflops ? entry.gflops.toFixed(1) : "–"),
        h("td", {}, open),
      );
    });
    tuneTop.replaceChildren(
      h("div", { class: "sl-card-title" }, "Best schedules"),
      h(
        "table",
        { class: "sl-table" },
        h(
          "tr",
          {},
          h("th", {}, "rank"),
          several ? h("th", {}, "kernel") : null,
          h("th", {}, "latency"),
          h("th", {}, "GFLOP/s"),
          h("th", {}, ""),
        ),
        rows,
      ),
    );
  }

  function renderCode(s) {
    const code = s.code || { html: "", error: "", target: "" };
    codeHeader.textContent = code.target ? `generated code for ${code.target}` : "";
    codeError.textContent = code.error || "";
    codeError.hidden = !code.error;
    if (code.html) codePre.innerHTML = code.html;
    else codePre.replaceChildren(h("span", { class: "sl-empty" }, "No generated code yet."));
  }

  function highlightCode(s) {
    const range = s.code?.lines?.[String(s.selection?.loop)];
    highlightLines(codePre, (n) => Boolean(range) && n >= range[0] && n <= range[1]);
    scrollToHighlight(panes.code);
  }

  function renderScript(s) {
    if (s.script?.html) scriptPre.innerHTML = s.script.html;
    else scriptPre.replaceChildren(h("span", { class: "sl-empty" }, "No function opened."));
    const mapped = new Set(Object.values(s.script?.lines || {}));
    for (const line of scriptPre.querySelectorAll(".sl-line")) {
      line.classList.toggle("sl-clickable", mapped.has(Number(line.dataset.line)));
    }
  }

  function highlightScript(s) {
    const lines = s.script?.lines || {};
    const wanted = new Set(
      [s.selection?.loop, s.selection?.block]
        .filter((uid) => uid !== null && uid !== undefined)
        .map((uid) => lines[String(uid)]),
    );
    highlightLines(scriptPre, (n) => wanted.has(n));
    scrollToHighlight(panes.script);
  }

  // Close the primitive's form once its apply came back without an error.
  function settleForm(s) {
    if (ui.applySeq === null || s.seq < ui.applySeq) return;
    if (s.seq === ui.applySeq && s.message?.level !== "error" && ui.openPrimitive) {
      delete ui.formValues[ui.openPrimitive];
      delete ui.formErrors[ui.openPrimitive];
      ui.openPrimitive = null;
      memo.palette = memo.form = undefined;
    }
    ui.applySeq = null;
  }

  function recordRoundtrip(s) {
    root.dataset.seq = String(s.seq ?? 0);
    const sent = pending.get(s.seq);
    if (sent) {
      const ms = performance.now() - sent.t0;
      root.dataset.roundtripMs = ms.toFixed(2);
      window.__schedlabRoundtrips = window.__schedlabRoundtrips || [];
      window.__schedlabRoundtrips.push({ seq: s.seq, type: sent.type, ms });
    }
    for (const seq of pending.keys()) if (seq <= (s.seq ?? 0)) pending.delete(seq);
    markBusy();
    showBusy();
  }

  // The Panel app sends the state as JSON text, and only the fields that changed, marked
  // `partial` (docs/explorer.md): merged into the state this view has. A view that has none
  // asks for the whole one.
  let parsed = [null, null]; // [text, its value]: each text is parsed once
  function incomingState() {
    const raw = model.get("state");
    if (typeof raw !== "string") return raw;
    if (parsed[0] !== raw) parsed = [raw, raw ? JSON.parse(raw) : null];
    return parsed[1];
  }

  function update() {
    const incoming = incomingState();
    if (incoming?.partial) {
      if (!state) {
        if (!pending.size) send({ type: "resync" });
        return;
      }
      const merged = { ...state, ...incoming };
      delete merged.partial;
      state = merged;
    } else {
      state = incoming;
    }
    if (!state) {
      root.classList.add("sl-waiting");
      return;
    }
    root.classList.remove("sl-waiting");
    const s = state;
    lastSeq = Math.max(lastSeq, s.seq || 0);
    settleForm(s);
    const sel = s.selection || {};
    if (changed("toolbar", [s.workloads, s.targets, s.target, s.functions, s.func, s.source])) {
      renderToolbar(s);
    }
    if (changed("graph", s.graph_svg)) renderGraph(s);
    if (changed("graph-selection", [s.graph_svg, sel])) markGraphSelection(s);
    const messageChanged = changed("message", s.message);
    if (changed("tree", [s.tree, sel, s.message?.uids]) || messageChanged) {
      renderTree(s, messageChanged && Boolean(s.message?.uids?.length));
    }
    if (messageChanged) renderMessage(s);
    if (changed("palette", [s.palette, ui.openPrimitive])) renderPalette(s);
    if (changed("form", [s.palette, s.loop_choices, s.block_choices, sel, ui.openPrimitive])) {
      renderForm(s);
    }
    if (changed("perf", [s.prediction, s.measurement, s.latency, s.func])) renderPerf(s);
    const history = [s.steps, s.current_step, s.can_undo, s.can_redo, s.branches, s.branch];
    if (changed("history", history)) {
      renderHistory(s);
    }
    const codeChanged = changed("code", s.code?.html ?? "");
    if (changed("code-meta", [s.code?.target, s.code?.error]) || codeChanged) {
      renderCode(s);
      memo["code-hl"] = undefined;
    }
    if (changed("code-hl", [s.code?.lines, sel.loop])) highlightCode(s);
    if (changed("script", s.script?.html ?? "")) {
      renderScript(s);
      memo["script-hl"] = undefined;
    }
    if (changed("script-hl", [s.script?.lines, sel])) highlightScript(s);
    if (changed("diff-controls", [s.steps, s.current_step, s.diff?.a, s.diff?.b])) {
      renderDiffControls(s);
    }
    if (changed("diff", s.diff)) renderDiff(s);
    if (changed("compare", [s.compare, s.branches])) renderCompare(s);
    if (changed("pipeline", s.pipeline)) renderPipeline(s);
    if (changed("trace", s.trace)) renderTrace(s);
    if (changed("tune", [s.tune, s.targets, s.target])) renderTune(s);
    if (changed("panels", s.panels || [])) renderPanels(s);
    recordRoundtrip(s);
    followDiff();
  }

  showTab(ui.tab);
  update();
  const onState = () => update();
  model.on("change:state", onState);
  return () => {
    model.off?.("change:state", onState);
    if (busyTimer !== null) clearInterval(busyTimer);
    clearTimeout(slowTimer);
    root.remove();
  };
}

export default { render };
