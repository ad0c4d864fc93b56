// The freshness_magic pipeline view: an anywidget ES module shipped with the package (no network).
//
// The model carries the laid-out SVG once per pipeline structure (`graph`), every node's state as
// one character per node (`states`), short explanations of the nodes that need attention (`notes`),
// the run line (`run`), a banner, the waiting gate and the newest evidence rows. States change by
// setting `data-state` on node groups; the palette CSS colours them. Everything from the pipeline
// is inserted as text (the SVG is sanitised and escaped by the kernel side). Actions go back as
// `{action, ...}` messages; details, evidence records and playground answers come back as replies.

const CODES = {
  p: "pending", n: "next", r: "running", s: "succeeded", a: "partial", f: "failed",
  y: "retrying", w: "waiting", b: "blocked", k: "skipped", i: "interrupted", t: "stale",
  T: "stale", o: "outdated", O: "outdated", u: "reused",
};
const STALE = { t: "baseline", T: "run" };
const MIN_LABEL_PX = 9.5; // smallest node label on screen at the default zoom
const LABEL_PT = 11; // node font size given to dot (points; 1pt = 4/3 px)
const MAX_SCALE = 3;
const ABS_MIN_SCALE = 0.1; // Fit's floor: an outline of a very large graph
const FIT_MAX = 1.25; // a small graph is not blown up past this
const VIEW_VH = 0.75; // the viewport grows with the graph up to this share of the window...
const MIN_VIEW_PX = 120; // ...and is never shorter than this (its handle resizes it)
const CANVAS_PAD = 8; // the canvas's padding (graph.css): room for a focus ring at the edge
const AROUND_X = 2 * CANVAS_PAD + 2; // the canvas's padding and the viewport's border, across
const AROUND_Y = 2 * CANVAS_PAD + 4; // ...and down
const VIEW_ONLY = ["fm-zoom-in", "fm-zoom-out", "fm-fit", "fm-zoom-reset", "fm-details-close",
  "fm-evidence-fewer"]; // what still works in a view that no longer drives a run
const DEAD = "This view lost its kernel (restarted or shut down), so it drives nothing any more:"
  + " run %load_ext freshness_magic (the extension is not loaded in a new kernel), then run"
  + " this cell again for a live view of the run it left on disk.";
const NO_ANSWER_MS = 5000; // a click the kernel has not answered by then gets a notice
const STEP_TITLE = "Run the next node";
const ACCEPT_TITLE = "Accept changed inputs as the new baseline";
const RUN_TITLE = "Run to the exit, a gate or a failure";
const RUN_TO_TITLE = "Run until the chosen node is next";
const WORKER_ACTIONS = new Set(["step", "run", "run_to", "retry", "accept", "reset",
  "resume_offered", "start_new", "keep_run", "answer"]); // run on the kernel's worker; end with "done"

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const NARROW_PX = 760; // narrower, the view lays itself out for a narrow notebook (.fm-narrow)

function btn(label, cls, title) {
  const b = h("button", `fm-btn ${cls}`, label);
  b.type = "button";
  if (title) b.title = title;
  return b;
}

function fmtSeconds(s) {
  if (!isFinite(s) || s < 0) return "";
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  return `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
}

function render({ model, el }) {
  const root = h("div", "fm-root fm-widget");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  root.tabIndex = -1;
  el.appendChild(root);

  // --- header, toolbar, banner, progress -------------------------------------------------------
  const header = h("div", "fm-header");
  const title = h("span", "fm-title");
  const status = h("span", "fm-status");
  const timer = h("span", "fm-timer");
  const badge = h("span", "fm-badge", "simulated LLM");
  badge.title = "codergen nodes use the simulated backend (no model is called)";
  const note = h("div", "fm-note");
  header.append(title, status, timer, badge);

  const toolbar = h("div", "fm-toolbar fm-controls");
  const stepB = btn("Step", "fm-step", STEP_TITLE);
  const runB = btn("Run", "fm-run", RUN_TITLE);
  const runToB = btn("Run to", "fm-run-to", RUN_TO_TITLE);
  const runToSel = h("select", "fm-run-to-node");
  runToSel.title = "node to run to";
  const stopB = btn("Stop", "fm-stop", "Stop the running node (the run can go on later)");
  const acceptB = btn("Accept changes", "fm-accept", ACCEPT_TITLE);
  const resetB = btn("Reset", "fm-reset",
    "Leave this run (an unfinished one stays offered to resume); the next action starts a new one");
  const spacer = h("span", "fm-spacer");
  const zoomOutB = btn("−", "fm-zoom-out", "Zoom out (Ctrl + wheel)");
  const scaleLabel = h("span", "fm-scale");
  const zoomInB = btn("+", "fm-zoom-in", "Zoom in (Ctrl + wheel)");
  const fitB = btn("Fit", "fm-fit", "Fit the whole graph in view");
  const actualB = btn("1:1", "fm-zoom-reset", "Natural size");
  toolbar.append(stepB, runB, runToB, runToSel, stopB, acceptB, resetB, spacer,
    zoomOutB, scaleLabel, zoomInB, fitB, actualB);
  const actionButtons = [stepB, runB, runToB, acceptB, resetB];

  const progress = h("div", "fm-progress");
  const bar = h("div", "progress-bar fm-progress-bar");
  progress.append(bar);

  const goal = h("div", "fm-goal"); // the pipeline's goal (graph [goal=...]), as prompts use it
  goal.hidden = true;
  const said = h("div", "fm-said"); // the last line of what the view's last action answered
  said.hidden = true;
  const banner = h("div", "fm-banner");
  banner.hidden = true;
  const notice = h("div", "fm-notice");
  notice.hidden = true;

  // --- graph and details -----------------------------------------------------------------------
  const main = h("div", "fm-main");
  const viewport = h("div", "fm-viewport fm-graph");
  viewport.tabIndex = 0;
  viewport.setAttribute("role", "region");
  viewport.setAttribute("aria-label",
    "pipeline graph: the arrow keys move it, + and - zoom; Tab goes to its nodes");
  const canvas = h("div", "fm-canvas");
  viewport.append(canvas);
  const details = h("aside", "fm-details");
  details.hidden = true;
  main.append(viewport, details);
  const legend = h("div", "fm-legend");

  // --- gate, evidence, playground, log ---------------------------------------------------------
  const gate = h("section", "fm-gate");
  gate.hidden = true;
  gate.tabIndex = -1; // a click anywhere on the panel puts the focus in it: its keys then answer
  const evidence = h("section", "fm-evidence");
  const playground = h("section", "fm-playground");
  const log = h("div", "fm-log");

  root.append(header, goal, note, toolbar, said, notice, progress, banner, main, legend, gate, evidence,
    playground, log);

  // mode: "readable" (how the view opens), "whole" (after Fit) or "user" (zoomed by hand);
  // moved: the user scrolled, panned or zoomed, so the view stops following the run until the
  // next action from its buttons or Fit; expect: the scroll position the view itself last set.
  const view = { scale: 1, natural: [0, 0], svg: null, groups: [], edges: [], titles: [],
    nodes: [], selected: null, mode: "readable", moved: false, expect: null, chosenEdge: null,
    focus: null, acting: false, waiting: null, dead: false, shownWidth: -1, shownHeight: -1,
    shownGate: null, asked: false, returnTo: null, armed: null,
    keyNode: null, start: null, exit: null }; // the node in the Tab order; Home's and End's

  // A click is answered by the kernel: a reply, or a state update (a longer action is shown
  // running within a moment). Without an answer the page says so instead of doing nothing: the
  // kernel may be busy with a cell, or it was restarted behind this page and JupyterLab sends
  // this view's messages on a kernel subshell the new kernel does not have (a view created
  // after reloading the page works).
  function send(msg) {
    if (model.get("note")) return;
    if (view.dead) { markDead(); return; }
    const active = document.activeElement;
    if (WORKER_ACTIONS.has(msg.action) && active && active !== root && root.contains(active)) {
      view.returnTo = active;
    }
    clearRefusal();
    view.asker = active && active !== root && root.contains(active) ? active : null;
    try {
      model.send(msg);
    } catch (err) {
      markDead(); // the view's connection to its kernel is gone
      return;
    }
    if (WORKER_ACTIONS.has(msg.action)) {
      view.acting = true;
      view.asked = true;
      view.moved = false; // the user asked the run to go on: show where it goes
      applyRun();
    }
    if (msg.action !== "stop") {
      clearTimeout(view.waiting);
      view.waiting = setTimeout(() => {
        notice.textContent = `The kernel has not answered "${msg.action}" yet. It may be busy`
          + " running a cell. If it was restarted, run %load_ext freshness_magic and then this"
          + " cell again (after a restart outside this page, reload the page first).";
        notice.hidden = false;
      }, NO_ANSWER_MS);
    }
  }
  // A view whose kernel was restarted or shut down drives nothing: the widget manager then marks
  // its model disconnected (comm_live false), which the model announces as "comm_live_update";
  // after this view was drawn that event means only that. The controls are greyed and disabled
  // at once, not only after a click that goes nowhere; zoom, pan and the details shown still work.
  function inert() {
    return view.dead || !!model.get("note");
  }
  function lockControls() {
    if (!inert()) return;
    for (const b of root.querySelectorAll("button, input, select, textarea")) {
      if (!VIEW_ONLY.some((c) => b.classList.contains(c))) b.disabled = true;
    }
  }
  function markDead() {
    clearTimeout(view.waiting);
    view.waiting = null;
    notice.textContent = DEAD;
    notice.hidden = false;
    if (view.dead) return;
    view.dead = true;
    view.acting = false;
    root.classList.add("fm-dead");
    tick();
    lockControls();
    deadHeader();
  }
  // The header of a view without its kernel says so: its last state ("running") is no more.
  function deadHeader() {
    const said = status.firstElementChild && status.firstElementChild.firstChild;
    if (!said || said.nodeType !== Node.TEXT_NODE) return;
    said.textContent = `no kernel · last seen: ${(model.get("run") || {}).line || ""}`;
    status.firstElementChild.dataset.state = "";
  }
  const onCommLive = () => markDead();

  function answered() {
    clearTimeout(view.waiting);
    view.waiting = null;
    if (!view.dead) notice.hidden = true;
  }
  // The action buttons: off while an action runs or the view is inert; Step, Run and Run to
  // off at a waiting gate, after a failure or after the end (their tooltip says where to act
  // instead); Accept
  // changes off unless a node is drawn stale or outdated by changed inputs ("O", outdated
  // because an upstream node ran again, is cleared only by running it).
  function lockActions(run) {
    const held = document.activeElement;
    for (const b of actionButtons) b.disabled = view.acting || inert();
    // An unfinished run found on disk is offered: Run would start a new run beside it.
    const offered = (model.get("banner") || {}).holds
      ? "An unfinished run is offered above: Resume it, or Start new" : "";
    const stuck = offered || { waiting: "The run waits at a gate: answer it below",
      completed: "The run completed: Reset starts a new one",
      failed: "The run failed: Retry (above) runs the failed node again and goes on;"
        + " Reset starts a new run" }[run.state];
    for (const [b, title] of [[stepB, STEP_TITLE], [runB, RUN_TITLE], [runToB, RUN_TO_TITLE]]) {
      if (stuck) b.disabled = true;
      b.title = stuck || title;
    }
    const changed = [...(model.get("states") || "")]
      .some((code) => CODES[code] === "stale" || code === "o");
    if (!changed) acceptB.disabled = true;
    acceptB.title = changed ? ACCEPT_TITLE : "No inputs changed: nothing to accept";
    // A disabled button loses the focus to the page: keep it in the view (on Stop while the
    // action runs), so a gate's keys work when it appears and the next Tab starts here.
    if (held && held.disabled && root.contains(held)) {
      (stopB.disabled || stopB.hidden ? root : stopB).focus({ preventScroll: true });
    }
  }
  // After the view's own action: back to the button used, or the gate it reached, or the first
  // action that can go on; not when the user has moved on elsewhere meanwhile.
  function restoreFocus() {
    const was = view.returnTo;
    view.returnTo = null;
    const active = document.activeElement;
    if (!was || (active && active !== document.body && active !== root)) return;
    const choice = gate.hidden ? null : gate.querySelector(".fm-gate-choice:not(:disabled)");
    const usable = (b) => b && b.isConnected && !b.disabled && !b.hidden;
    const target = (usable(was) && !choice ? was : null) || choice
      || actionButtons.find(usable) || (usable(stopB) ? stopB : root);
    target.focus({ preventScroll: true });
  }
  function showSaid(line, text) {
    view.saidLine = (model.get("run") || {}).line;
    said.textContent = line;
    said.title = text;
    said.hidden = !line;
  }
  // An action's refusal is shown next to the control that asked (the banner's Resume, a gate's
  // choice, a button in the toolbar or the details), not only in the log at the bottom.
  function clearRefusal() {
    for (const r of root.querySelectorAll(".fm-refusal")) r.remove();
  }
  function showRefusal(text) {
    const asker = view.asker;
    view.asker = null;
    if (!asker || !asker.isConnected) return false;
    const box = asker.closest(".fm-banner, .fm-gate-choices, .fm-toolbar, .fm-details, section")
      || asker.parentElement;
    const line = h("div", "fm-refusal", text.replace(/^[\w.]*Error: /, ""));
    line.setAttribute("role", "alert");
    box.after(line);
    return true;
  }
  function showError(text) {
    const pre = h("pre", "fm-error", text);
    log.append(pre);
    while (log.children.length > 5) log.firstChild.remove();
  }

  // --- zoom and pan ----------------------------------------------------------------------------
  // The view opens "readable": the whole graph when its labels stay readable, else the readable
  // minimum (the rest scrolls), with the run's current node in view. Fit shows the whole graph
  // however small (an overview: hover a node for its name, zoom in where needed). The zoom
  // buttons, 1:1 and Ctrl+wheel set the user's own scale, which only the user changes after.
  // The viewport grows with the drawn graph up to VIEW_VH of the window; its handle (bottom
  // right) makes it taller or shorter. Opening or closing the details panel changes neither the
  // scale nor the scroll position (only scrolls, as little as needed, to keep the clicked node
  // in view), and a resize of the cell refits only a view the user has not moved.
  function minScale() {
    return MIN_LABEL_PX / (LABEL_PT * 4 / 3);
  }
  function maxAutoHeight() {
    return Math.max(MIN_VIEW_PX, Math.round(window.innerHeight * VIEW_VH));
  }
  function userHeight() { // the height the user gave the viewport with its handle, else 0
    return viewport.style.height ? viewport.clientHeight : 0;
  }
  function remember() {
    view.expect = [viewport.scrollLeft, viewport.scrollTop];
  }
  function setScroll(left, top) {
    viewport.scrollLeft = left;
    viewport.scrollTop = top;
    remember();
  }
  viewport.addEventListener("scroll", () => {
    const e = view.expect;
    const maxLeft = viewport.scrollWidth - viewport.clientWidth;
    const maxTop = viewport.scrollHeight - viewport.clientHeight;
    // A position the view set itself, or one the browser clamped after a size change, is not
    // the user's doing.
    const same = (at, want, max) => Math.abs(at - want) < 2 || (want > max && Math.abs(at - max) < 2);
    if (!e || !(same(viewport.scrollLeft, e[0], maxLeft) && same(viewport.scrollTop, e[1], maxTop))) {
      view.moved = true;
    }
    remember();
  }, { passive: true });
  function autoHeight() {
    if (!view.svg) return;
    const wide = view.natural[0] * view.scale + AROUND_X > viewport.clientWidth;
    const bar = wide ? (viewport.offsetHeight - viewport.clientHeight - 2 || 15) : 0;
    const drawn = Math.ceil(view.natural[1] * view.scale) + AROUND_Y + bar;
    root.style.setProperty("--fm-view-h", `${Math.max(MIN_VIEW_PX, Math.min(maxAutoHeight(), drawn))}px`);
  }
  function applyScale(scale, anchor) {
    if (!view.svg) return;
    const old = view.scale;
    scale = Math.max(ABS_MIN_SCALE, Math.min(MAX_SCALE, scale));
    const ax = anchor ? anchor[0] : viewport.clientWidth / 2;
    const ay = anchor ? anchor[1] : viewport.clientHeight / 2;
    const gx = (viewport.scrollLeft + ax) / old;
    const gy = (viewport.scrollTop + ay) / old;
    view.scale = scale;
    view.svg.setAttribute("width", String(view.natural[0] * scale));
    view.svg.setAttribute("height", String(view.natural[1] * scale));
    autoHeight();
    setScroll(gx * scale - ax, gy * scale - ay);
    scaleLabel.textContent = `${Math.round(scale * 100)}%`;
    scaleLabel.title = scale < minScale() - 1e-6
      ? "labels are smaller than readable at this scale: hover a node for its name, zoom in to read"
      : "";
    root.style.setProperty("--fm-scale", String(scale));
  }
  function fitScale(mode) {
    const width = viewport.clientWidth - AROUND_X;
    const height = (userHeight() || maxAutoHeight()) - AROUND_Y;
    const across = width > 0 ? width / view.natural[0] : 1;
    const down = height > 0 && view.natural[1] ? height / view.natural[1] : across;
    const whole = Math.min(FIT_MAX, across, down);
    return mode === "whole" ? Math.max(ABS_MIN_SCALE, whole) : Math.max(minScale(), whole);
  }
  // The node the view shows when it (re)fits: the running node, the waiting gate, the node of
  // the banner (a failure), the selected node, else the next one.
  function focusNode() {
    const run = model.get("run") || {};
    const next = view.nodes[[...(model.get("states") || "")].indexOf("n")];
    return run.running || (model.get("gate") || {}).node || (model.get("banner") || {}).node
      || view.selected || next || null;
  }
  function fit(mode) {
    view.mode = mode;
    if (!view.svg || !view.natural[0] || !viewport.clientWidth) return;
    applyScale(fitScale(mode));
    setScroll(0, 0);
    const focus = focusNode();
    if (focus) scrollToNode(focus, "follow");
  }
  function zoomTo(scale, anchor) {
    view.mode = "user";
    view.moved = true;
    applyScale(scale, anchor);
  }
  zoomInB.onclick = () => zoomTo(view.scale * 1.25);
  zoomOutB.onclick = () => zoomTo(view.scale / 1.25);
  fitB.onclick = () => { view.moved = false; fit("whole"); };
  actualB.onclick = () => zoomTo(1);
  // The wheel zooms with Ctrl; otherwise it scrolls the notebook, as over any output, until
  // the graph is clicked or tabbed to: then it scrolls the graph (a tall graph took every wheel
  // turn over it, and the notebook would not move past it).
  function engaged() {
    return viewport === document.activeElement || viewport.contains(document.activeElement);
  }
  function scrollingParent() {
    for (let e = root.parentElement; e; e = e.parentElement) {
      const y = getComputedStyle(e).overflowY;
      if ((y === "auto" || y === "scroll") && e.scrollHeight > e.clientHeight) return e;
    }
    return document.scrollingElement;
  }
  viewport.addEventListener("wheel", (ev) => {
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      const r = viewport.getBoundingClientRect();
      zoomTo(view.scale * Math.exp(-ev.deltaY * 0.0015), [ev.clientX - r.left, ev.clientY - r.top]);
      return;
    }
    if (engaged() || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) return;
    const outer = scrollingParent();
    if (!outer) return;
    ev.preventDefault();
    const unit = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? outer.clientHeight : 1;
    outer.scrollBy({ top: ev.deltaY * unit });
  }, { passive: false });
  // With the graph focused, keys move it (JupyterLab would take the arrows to change cells):
  // arrows scroll, Page Up/Down and Home/End go a view or to an end, + and - zoom, 0 is 1:1.
  const PAN_PX = 60;
  viewport.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const page = viewport.clientHeight * 0.9;
    const moves = {
      ArrowLeft: [-PAN_PX, 0], ArrowRight: [PAN_PX, 0], ArrowUp: [0, -PAN_PX], ArrowDown: [0, PAN_PX],
      PageUp: [0, -page], PageDown: [0, page],
    };
    if (ev.key in moves) {
      const [dx, dy] = moves[ev.key];
      viewport.scrollBy({ left: ev.shiftKey ? dx * 4 : dx, top: ev.shiftKey ? dy * 4 : dy });
    } else if (ev.key === "Home" || ev.key === "End") {
      viewport.scrollTo({ top: ev.key === "Home" ? 0 : viewport.scrollHeight });
    } else if (ev.key === "+" || ev.key === "=") {
      zoomInB.click();
    } else if (ev.key === "-") {
      zoomOutB.click();
    } else if (ev.key === "0") {
      actualB.click();
    } else {
      return; // other keys go on to the view
    }
    ev.preventDefault();
    ev.stopPropagation();
  });
  let drag = null;
  viewport.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, left: viewport.scrollLeft, top: viewport.scrollTop, moved: false };
  });
  function onPointerMove(ev) {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    const dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true;
    viewport.classList.add("fm-dragging");
    viewport.scrollLeft = drag.left - dx;
    viewport.scrollTop = drag.top - dy;
  }
  function onPointerUp() {
    if (drag && drag.moved) view.justDragged = true;
    drag = null;
    viewport.classList.remove("fm-dragging");
    setTimeout(() => { view.justDragged = false; }, 0);
  }
  window.addEventListener("pointermove", onPointerMove);
  window.addEventListener("pointerup", onPointerUp);
  // The cell got wider or narrower, or the user dragged the viewport's handle: refit a view the
  // user has not moved. The details panel opening or closing changes neither (the panel takes
  // its room from the viewport, not from the cell).
  function onResize() {
    root.classList.toggle("fm-narrow", root.clientWidth > 0 && root.clientWidth < NARROW_PX);
    const width = main.clientWidth;
    const height = userHeight();
    root.style.setProperty("--fm-shown-h", `${viewport.offsetHeight}px`);
    if (width === view.shownWidth && height === view.shownHeight) return;
    view.shownWidth = width;
    view.shownHeight = height;
    if (view.mode !== "user" && !view.moved) fit(view.mode);
    // the details panel took its room from the graph: the node it shows stays in view
    if (!details.hidden && view.selected) scrollToNode(view.selected, "keep");
  }
  const resize = new ResizeObserver(() => requestAnimationFrame(onResize));
  resize.observe(root);
  resize.observe(main);
  resize.observe(viewport);

  // --- the graph ---------------------------------------------------------------------------------
  function loadGraph() {
    const g = model.get("graph") || {};
    title.hidden = true; // the status line starts with "pipeline <name>:"
    goal.textContent = g.goal ? `goal: ${g.goal}` : "";
    goal.title = g.goal || "";
    goal.hidden = !g.goal;
    const hadFocus = canvas.contains(document.activeElement); // a node: keep it on the redrawn one
    canvas.innerHTML = g.svg || "";
    const svg = canvas.querySelector("svg");
    view.svg = svg;
    view.nodes = g.nodes || [];
    view.groups = [];
    view.titles = [];
    if (!svg) return;
    const box = (svg.getAttribute("viewBox") || "0 0 0 0").split(/\s+/).map(Number);
    view.natural = [box[2] * 4 / 3, box[3] * 4 / 3];
    svg.removeAttribute("style");
    const byId = new Map();
    for (const grp of svg.querySelectorAll("g.fm-node")) byId.set(grp.dataset.node, grp);
    for (const id of view.nodes) {
      const grp = byId.get(id) || null;
      view.groups.push(grp);
      const t = grp && grp.querySelector(":scope > title");
      view.titles.push(t ? t.textContent : id);
      if (grp) { grp.setAttribute("tabindex", "-1"); grp.setAttribute("role", "button"); }
    }
    const had = view.keyNode;
    rove(view.nodes.includes(had) ? had : view.nodes[0]);
    if (hadFocus && view.keyNode) focusOn(view.keyNode);
    view.edges = [...svg.querySelectorAll("g.fm-edge")];
    view.start = g.start || null;
    view.exit = (g.exits || [])[0] || null;
    // The Run to list keeps the user's choice across redraws; it starts at the exit.
    const chosen = runToSel.value;
    runToSel.replaceChildren(...view.nodes.map((id) => { const o = h("option", "", id); o.value = id; return o; }));
    const exits = g.exits || [];
    const keep = view.nodes.includes(chosen) ? chosen : exits[0];
    if (keep) runToSel.value = keep;
    playNode.replaceChildren(h("option", "", "(last node)"),
      ...view.nodes.map((id) => { const o = h("option", "", id); o.value = id; return o; }));
    playNode.firstChild.value = "";
    if (view.mode === "user") applyScale(view.scale); else requestAnimationFrame(() => fit(view.mode));
    applyStates();
    drawLegend();
  }

  canvas.addEventListener("click", (ev) => {
    if (view.justDragged) return;
    const grp = ev.target.closest && ev.target.closest("g.fm-node");
    if (!grp) return;
    rove(grp.dataset.node);
    select(grp.dataset.node);
  });

  // The nodes are one stop in the Tab order (the last one reached by keyboard or click); on a
  // node, the arrow keys go to the nearest node that way, Home and End to the start and exit,
  // Enter or Space open its details, Escape closes them, else goes back to the graph.
  function rove(id) {
    view.keyNode = id;
    view.groups.forEach((grp, i) => {
      if (grp) grp.setAttribute("tabindex", view.nodes[i] === id ? "0" : "-1");
    });
  }
  function focusOn(id) {
    const grp = view.groups[view.nodes.indexOf(id)];
    if (!grp) return;
    rove(id);
    grp.focus({ preventScroll: true });
    scrollToNode(id, "keep");
    showInPage(grp);
  }
  // The node in the page's visible part too (the notebook scrolls, not only the graph).
  function showInPage(grp) {
    requestAnimationFrame(() => grp.scrollIntoView({ block: "nearest", inline: "nearest" }));
  }
  const AHEAD = { ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowDown: [0, 1], ArrowUp: [0, -1] };
  function nearest(from, key) {
    const centre = (grp) => {
      const r = grp.getBoundingClientRect();
      return [(r.left + r.right) / 2, (r.top + r.bottom) / 2];
    };
    const [dx, dy] = AHEAD[key];
    const [x0, y0] = centre(view.groups[view.nodes.indexOf(from)]);
    let best = null;
    let bestCost = Infinity;
    view.groups.forEach((grp, i) => {
      if (!grp || view.nodes[i] === from) return;
      const [x, y] = centre(grp);
      const along = (x - x0) * dx + (y - y0) * dy;
      const across = Math.abs((x - x0) * dy + (y - y0) * dx);
      if (along <= 1 || across > along) return; // only what lies that way (within 45°)
      const cost = along + 2 * across;
      if (cost < bestCost) { best = view.nodes[i]; bestCost = cost; }
    });
    return best;
  }
  canvas.addEventListener("keydown", (ev) => {
    const grp = ev.target.closest && ev.target.closest("g.fm-node");
    if (!grp || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const id = grp.dataset.node;
    let to = null;
    if (ev.key in AHEAD) to = nearest(id, ev.key) || id;
    else if (ev.key === "Home") to = view.start || view.nodes[0];
    else if (ev.key === "End") to = view.exit || view.nodes[view.nodes.length - 1];
    else if (ev.key === "Enter" || ev.key === " ") select(id);
    else if (ev.key === "Escape" && !details.hidden) closeB.click();
    else if (ev.key === "Escape") viewport.focus({ preventScroll: true });
    else return; // zoom keys and Page Up/Down go on to the graph
    if (to) focusOn(to);
    ev.preventDefault();
    ev.stopPropagation();
  });

  function applyStates() {
    const codes = model.get("states") || "";
    lockActions(model.get("run") || {});
    const notes = model.get("notes") || {};
    const glyphs = (model.get("graph") || {}).glyphs || {};
    view.groups.forEach((grp, i) => {
      if (!grp) return;
      const code = codes[i] || "p";
      const state = CODES[code] || "pending";
      if (grp.dataset.state !== state) grp.dataset.state = state;
      if (STALE[code]) grp.dataset.stale = STALE[code]; else delete grp.dataset.stale;
      // Each stale kind has its own mark (viewstate.STALE_GLYPH), as its own outline.
      const glyph = (STALE[code] && glyphs[`stale:${STALE[code]}`]) || glyphs[state] || "";
      const mark = grp.querySelector(":scope > text.fm-glyph");
      if (mark && mark.textContent !== glyph) mark.textContent = glyph;
      const id = view.nodes[i];
      const t = grp.querySelector(":scope > title");
      const extra = notes[id] ? `\n${state}: ${notes[id]}` : `\n${state}`;
      if (t) t.textContent = view.titles[i] + extra;
      grp.setAttribute("aria-label", `${id}: ${state}`);
    });
    drawLegend();
    if (view.selected) updateDetailsState();
  }

  // One legend entry per way a node is drawn (stale has two: dashed since baseline, dotted since
  // it ran), each swatch an SVG shape in a g.fm-key group that the palette CSS paints exactly as
  // it paints node groups of that state.
  // The swatch is the kernel's SVG (viewstate.swatch_svg, as the static view draws it); the
  // palette CSS paints its g.fm-key as it paints the nodes.
  function swatch(item) {
    const holder = document.createElement("template");
    holder.innerHTML = item.swatch || "";
    return holder.content.firstElementChild || h("span", "fm-swatch");
  }
  function drawLegend() {
    const g = model.get("graph") || {};
    const codes = model.get("states") || "";
    const items = (g.legend || []).slice();
    const known = new Set(items.map((x) => x.state));
    for (const code of new Set(codes)) {
      const s = CODES[code];
      if (s && !known.has(s) && g.describe && g.describe[s]) items.push(...g.describe[s]);
      known.add(s);
    }
    legend.replaceChildren(...items.map((item) => {
      const span = h("span", "fm-legend-item");
      span.dataset.state = item.state;
      if (item.stale) span.dataset.stale = item.stale;
      span.title = item.text;
      span.append(swatch(item), h("span", "fm-legend-text", item.label || item.state));
      return span;
    }));
  }

  // --- run line, timer, banner -------------------------------------------------------------------
  let runReceived = performance.now();
  function applyRun() {
    const run = model.get("run") || {};
    runReceived = performance.now();
    // Between two nodes of this view's own Run the run is briefly "paused": the header says
    // it goes on (it is not waiting for anyone); the kernel's "done" ends that.
    const between = view.acting && run.state === "paused";
    const line = between ? (run.line || "").replace(": paused", ": running") : run.line || "";
    const span = h("span", "", line);
    span.dataset.state = between ? "running" : run.state || "";
    // The line under the buttons answers the view's last action: a run driven from a cell
    // (the run line changes while this view is not acting) makes it old news.
    if (!view.acting && !said.hidden && run.line !== view.saidLine) showSaid("", "");
    status.title = run.line || "";
    elapsed.hidden = run.elapsed === undefined;
    span.append(elapsed);
    status.replaceChildren(span);
    const total = run.total || 1;
    bar.style.width = `${Math.min(100, 100 * (run.done || 0) / total)}%`;
    badge.hidden = run.backend !== "simulated";
    const busy = view.acting;
    stopB.disabled = !run.running && !busy; // before the lock: focus may move on to Stop
    stopB.hidden = run.can_stop === false;
    lockActions(run);
    const paused = run.state === "paused" ? run.next : ""; // e.g. after Run to: where it goes on
    const current = run.running || (model.get("gate") || {}).node || paused || "";
    if (current !== view.followed) follow(current);
    view.followed = current;
    tick();
    lockControls();
    if (view.dead) deadHeader();
  }
  // The run's elapsed time is its active time (its steps' time, across %pipeline resume; time
  // waiting at a gate or paused does not count): the kernel sends it with every update, and
  // while a node runs the page counts it on with the node's own timer.
  const elapsed = h("span", "fm-elapsed");
  elapsed.title = "time the run has been at work: its steps, across resumes"
    + " (waiting at a gate or paused does not count)";
  function tick() {
    const run = model.get("run") || {};
    const running = run.running && !view.dead;
    const s = running ? (run.running_for || 0) + (performance.now() - runReceived) / 1000 : 0;
    elapsed.textContent = ` · ${fmtSeconds((run.elapsed || 0) + s)}`;
    if (running) {
      timer.textContent = `running ${run.running} · ${fmtSeconds(s)}`;
      timer.dataset.node = run.running;
      timer.hidden = false;
    } else {
      timer.textContent = "";
      timer.hidden = true;
    }
  }
  const ticker = setInterval(tick, 500);

  // Bring a node into view: "follow" centres it when it is not all in view; "keep" scrolls as
  // little as brings it in (the viewport got narrower under a node the user just clicked).
  function scrollToNode(id, how) {
    const i = view.nodes.indexOf(id);
    const grp = i >= 0 ? view.groups[i] : null;
    if (!grp) return;
    const v = viewport.getBoundingClientRect();
    const left = v.left + viewport.clientLeft;
    const top = v.top + viewport.clientTop;
    const right = left + viewport.clientWidth;
    const bottom = top + viewport.clientHeight;
    const r = grp.getBoundingClientRect();
    if (r.left >= left && r.right <= right && r.top >= top && r.bottom <= bottom) return;
    const centre = (lo, hi, a, b) => (a + b) / 2 - (lo + hi) / 2;
    const least = (lo, hi, a, b) => {
      if (b - a + 24 > hi - lo) return centre(lo, hi, a, b);
      if (a < lo) return a - lo - 12;
      return b > hi ? b - hi + 12 : 0;
    };
    const by = how === "keep" ? least : centre;
    setScroll(viewport.scrollLeft + by(left, right, r.left, r.right),
      viewport.scrollTop + by(top, bottom, r.top, r.bottom));
  }
  // Follow the run to its running node, the gate it waits at or the node it failed at, unless
  // the user moved the view since their last action (Step, Run, an answer...) or Fit.
  function follow(node) {
    if (!node || view.moved || drag) return;
    requestAnimationFrame(() => { if (!view.moved && !drag) scrollToNode(node, "follow"); });
  }

  function highlightFocus(node, edge) {
    for (const g of canvas.querySelectorAll(".fm-focus")) g.classList.remove("fm-focus");
    if (node) {
      const i = view.nodes.indexOf(node);
      if (i >= 0 && view.groups[i]) view.groups[i].classList.add("fm-focus");
    }
    if (edge) {
      for (const e of view.edges) {
        if (e.dataset.source === edge[0] && e.dataset.target === edge[1]) e.classList.add("fm-focus");
      }
    }
  }
  function applyBanner() {
    const b = model.get("banner") || {};
    lockActions(model.get("run") || {});
    if (!b.kind || (b.kind === "superseded" && model.get("note"))) {
      banner.hidden = true;
      banner.replaceChildren();
      highlightFocus(null, null);
      return;
    }
    banner.hidden = false;
    banner.dataset.kind = b.kind;
    if (b.node) banner.dataset.node = b.node; else delete banner.dataset.node;
    const label = { failed: "Run failed", dead_end: "Dead end", interrupted: "Stopped",
      superseded: "Superseded", resume: "Unfinished run", keep_run: "Edited pipeline",
      info: "Note" }[b.kind] || b.kind;
    const head = h("strong", "fm-banner-kind", label);
    const text = h("span", "fm-banner-text", b.text || "");
    banner.replaceChildren(head, text);
    if (b.node) {
      const go = btn(`show ${b.node}`, "fm-banner-node", "Open this node's details");
      go.onclick = () => select(b.node);
      banner.append(go);
    }
    if (b.kind === "resume") {
      const again = btn("Resume", "fm-banner-resume", "Reopen the unfinished run and go on");
      again.onclick = () => send({ action: "resume_offered" });
      const fresh = btn("Start new", "fm-banner-start-new", "Leave it on disk; start a new run");
      fresh.onclick = () => send({ action: "start_new" });
      banner.append(again, fresh);
    }
    if (b.kind === "keep_run") {
      const keep = btn("Keep the run", "fm-banner-keep-run",
        "Carry the run over to this edit: unchanged nodes keep their results, edited ones show stale");
      keep.onclick = () => send({ action: "keep_run" });
      const fresh = btn("Start new", "fm-banner-start-new", "Leave it on disk; start a new run");
      fresh.onclick = () => send({ action: "start_new" });
      banner.append(keep, fresh);
    }
    if ((b.kind === "failed" || b.kind === "interrupted") && (model.get("run") || {}).can_retry) {
      const retry = btn("Retry", "fm-banner-retry", "Retry from the failed or stopped node");
      retry.onclick = () => send({ action: "retry", node: b.node || null });
      banner.append(retry);
    }
    highlightFocus(b.node, b.edge);
    if (b.node !== view.bannerNode) follow(b.node);
    view.bannerNode = b.node;
    lockControls();
  }

  function applyNote() {
    const text = model.get("note") || "";
    note.textContent = text;
    note.hidden = !text;
    root.classList.toggle("fm-superseded", !!text);
    applyBanner(); // the note says why the view is grey: a banner saying it too goes
    lockControls();
  }

  // --- details panel -----------------------------------------------------------------------------
  const detailsHead = h("div", "fm-details-head");
  const detailsTitle = h("strong", "fm-details-title");
  const closeB = btn("×", "fm-details-close", "Close");
  closeB.onclick = () => { details.hidden = true; remember(); setSelected(null); };
  details.addEventListener("keydown", (ev) => { // Escape closes it, back to its node
    if (ev.key !== "Escape" || details.hidden) return;
    const id = view.selected;
    closeB.click();
    if (id) focusOn(id);
    ev.preventDefault();
    ev.stopPropagation();
  });
  detailsHead.append(detailsTitle, closeB);
  const detailsState = h("div", "fm-details-state");
  const detailsActions = h("div", "fm-details-actions");
  const runHereB = btn("Run to here", "fm-act-run-to", "Run until this node is next");
  const retryB = btn("Retry from here", "fm-act-retry", "Re-run the run from this node");
  const acceptHereB = btn("Accept changes", "fm-act-accept", "Accept this node's changed inputs");
  runHereB.onclick = () => send({ action: "run_to", node: view.selected });
  retryB.onclick = () => send({ action: "retry", node: view.selected });
  acceptHereB.onclick = () => send({ action: "accept", node: view.selected });
  detailsActions.append(runHereB, retryB, acceptHereB);
  const detailsBody = h("div", "fm-details-body");
  details.append(detailsHead, detailsState, detailsActions, detailsBody);

  function setSelected(id) {
    for (const g of canvas.querySelectorAll("g.fm-selected")) g.classList.remove("fm-selected");
    view.selected = id;
    if (id && view.nodes.includes(id)) runToSel.value = id;  // a clicked node is the one to run to
    const i = view.nodes.indexOf(id);
    if (i >= 0 && view.groups[i]) view.groups[i].classList.add("fm-selected");
  }
  function select(id) {
    setSelected(id);
    details.hidden = false;
    remember(); // the panel takes its room from the viewport: the scroll position stays...
    scrollToNode(id, "keep"); // ...unless the clicked node went out of view
    details.dataset.node = id;
    detailsTitle.textContent = id;
    updateDetailsState();
    if (inert()) {
      detailsBody.replaceChildren(h("div", "fm-muted", "this view no longer drives a run: no details"));
      return;
    }
    detailsBody.replaceChildren(h("div", "fm-muted", "loading…"));
    send({ action: "details", node: id });
  }
  function updateDetailsState() {
    const i = view.nodes.indexOf(view.selected);
    const code = (model.get("states") || "")[i] || "p";
    const state = CODES[code];
    const notes = model.get("notes") || {};
    const chip = h("span", "fm-state-chip", state);
    chip.dataset.state = state;
    chip.style.background = `var(--fm-${state}-fill)`;
    chip.style.borderColor = `var(--fm-${state}-stroke)`;
    detailsState.replaceChildren(chip);
    if (notes[view.selected]) detailsState.append(h("span", "fm-details-why", notes[view.selected]));
    retryB.hidden = !(model.get("run") || {}).can_retry;
    retryB.disabled = !["failed", "interrupted", "succeeded", "reused", "partial", "stale", "outdated", "blocked"].includes(state);
    acceptHereB.disabled = !["stale", "blocked"].includes(state) && code !== "o";
    acceptHereB.title = code === "o" ? "Accept the changed inputs upstream that make it outdated"
      : "Accept this node's changed inputs";
  }
  function value(v) {
    if (v === null || v === undefined) return h("span", "fm-muted", "—");
    if (typeof v === "string") {
      return v.includes("\n") || v.length > 80 ? h("pre", "fm-pre", v) : h("span", "", v);
    }
    if (typeof v !== "object") return h("span", "", String(v));
    if (Array.isArray(v)) {
      if (!v.length) return h("span", "fm-muted", "none");
      const ul = h("ul", "fm-list");
      for (const item of v) { const li = h("li"); li.append(value(item)); ul.append(li); }
      return ul;
    }
    const dl = h("dl", "fm-dl");
    for (const [k, x] of Object.entries(v)) { dl.append(h("dt", "", k)); const dd = h("dd"); dd.append(value(x)); dl.append(dd); }
    return dl;
  }
  function showDetails(node, data) {
    if (node !== view.selected) return;
    const parts = [];
    const shown = (data || {}).why;
    for (const [key, v] of Object.entries(data || {})) {
      if (key === "state" || key === "why" || (key === "notes" && v === shown)) continue;
      if (v === "" || v === null || v === undefined || (Array.isArray(v) && !v.length)) continue;
      const sec = h("section", `fm-details-section fm-details-${key.replace(/[^a-z0-9_-]/gi, "")}`);
      sec.append(h("h4", "", key.replace(/_/g, " ")), value(v));
      parts.push(sec);
    }
    detailsBody.replaceChildren(...(parts.length ? parts : [h("div", "fm-muted", "nothing recorded yet")]));
  }

  // --- gate --------------------------------------------------------------------------------------
  // A gate is answered only by an act aimed at it: a click on a choice, or a choice's key pressed
  // while the focus is inside the gate panel (not in its comment box). A key pressed on the graph,
  // a node or any other control does nothing to it. A choice that goes on to a node that looks
  // irreversible (it runs a command, or its name says deploy, publish, delete...) is armed by the
  // first click or key and answered by the second; another choice, or Escape, disarms it. The
  // answer is journalled at once and the run goes straight on, so the view asks before rather
  // than offering an Undo after.
  function choiceId(g, c) {
    return `${g.node}\u0000${c.key || c.target}`;
  }
  function disarm() {
    view.armed = null;
    for (const b of gate.querySelectorAll(".fm-gate-choice.fm-gate-armed")) {
      b.classList.remove("fm-gate-armed");
      b.textContent = b.dataset.text;
      b.removeAttribute("aria-describedby");
    }
    const line = gate.querySelector(".fm-gate-confirm");
    if (line) { line.hidden = true; line.textContent = ""; }
  }
  function arm(b, c) {
    disarm();
    view.armed = b.dataset.choiceId;
    b.classList.add("fm-gate-armed");
    b.textContent = `Confirm: ${c.text}`;
    const line = gate.querySelector(".fm-gate-confirm");
    line.textContent = `"${c.text}" goes on to ${c.target}, which ${c.confirm}.`
      + ` Click it again${c.key ? ` (or press ${c.key} again)` : ""} to answer;`
      + " another choice or Escape cancels.";
    line.hidden = false;
    b.setAttribute("aria-describedby", line.id);
  }
  function choose(g, c, b, comment) {
    if (c.confirm && view.armed !== b.dataset.choiceId) { arm(b, c); return; }
    disarm();
    send({ action: "answer", node: g.node, choice: c.key || c.target, comment: comment.value });
  }
  function applyGate() {
    const g = model.get("gate") || {};
    if (!g.node) {
      gate.hidden = true; gate.replaceChildren(); view.shownGate = null; view.armed = null; return;
    }
    gate.hidden = false;
    const q = h("div", "fm-gate-question");
    const inner = h("div");
    inner.dataset.node = g.node;
    inner.append(h("strong", "", g.node), document.createTextNode(`: ${g.question || ""}`));
    q.append(inner);
    if (g.visit > 1) q.append(h("div", "fm-gate-visit fm-muted", `asked again: visit ${g.visit}`));
    const parts = [h("h3", "fm-section-title", "Approval needed"), q];
    if (g.note) parts.push(h("div", "fm-gate-note", g.note)); // changed inputs upstream of it
    if (g.approving && g.approving.text) {
      const ap = h("div", "fm-gate-approving");
      ap.append(h("div", "fm-muted", g.approving.title || "what is being approved"), h("pre", "fm-pre", g.approving.text));
      parts.push(ap);
    }
    const old = gate.querySelector(".fm-gate-comment");
    const comment = h("textarea", "fm-gate-comment");
    comment.placeholder = "optional comment (stored with the answer)";
    comment.rows = 2;
    if (old && g.node === view.shownGate) comment.value = old.value; // an update keeps what was typed
    const row = h("div", "fm-gate-choices");
    const confirmLine = h("div", "fm-gate-confirm");
    confirmLine.id = `fm-gate-confirm-${Math.random().toString(36).slice(2)}`;
    confirmLine.setAttribute("role", "status");
    confirmLine.hidden = true;
    const armed = g.node === view.shownGate ? view.armed : null;
    view.armed = null;
    for (const c of g.choices || []) {
      const b = btn(c.text, "fm-gate-choice", `→ ${c.target}${c.key ? ` (key ${c.key})` : ""}`
        + (c.confirm ? ` · asks for a second click: ${c.target} ${c.confirm}` : ""));
      const safe = (c.key || "").replace(/[^A-Za-z0-9_-]/g, "");
      if (safe) b.classList.add(`fm-gate-choice-${safe}`);
      if (c.confirm) b.classList.add("fm-gate-choice-confirm");
      b.dataset.key = c.key || "";
      b.dataset.target = c.target;
      b.dataset.text = c.text;
      b.dataset.choiceId = choiceId(g, c);
      b.onclick = () => choose(g, c, b, comment);
      row.append(b);
    }
    parts.push(comment, row, confirmLine);
    gate.replaceChildren(...parts);
    if (armed) {
      const c = (g.choices || []).find((x) => choiceId(g, x) === armed);
      const b = [...row.children].find((x) => x.dataset.choiceId === armed);
      if (c && b && c.confirm) arm(b, c);
    }
    lockControls();
    // A gate that starts waiting after this view's own action is brought into view: its
    // buttons sit below the graph, often off screen.
    if (g.node !== view.shownGate && view.asked) gate.scrollIntoView({ block: "nearest" });
    view.shownGate = g.node;
    view.asked = false;
  }
  // A choice's key answers only with the focus inside the gate panel.
  function gateChoiceFor(ev) {
    if (gate.hidden || ev.ctrlKey || ev.metaKey || ev.altKey || ev.key.length !== 1) return null;
    const tag = (ev.target.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "input" || tag === "select") return null;
    for (const b of gate.querySelectorAll(".fm-gate-choice")) {
      if (b.dataset.key && b.dataset.key.toLowerCase() === ev.key.toLowerCase() && !b.disabled) {
        return b;
      }
    }
    return null;
  }
  gate.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && view.armed) {
      disarm();
      ev.preventDefault();
      ev.stopPropagation();
      return;
    }
    const b = gateChoiceFor(ev);
    if (!b) return;
    ev.preventDefault();
    b.focus({ preventScroll: true });
    b.click();
  });

  // Keys pressed in the view are the view's: the notebook's one-key shortcuts (a, b, d d, m,
  // j, k, the arrows...) would act on the cells around it. The view itself binds no letter outside its
  // text fields and the gate panel, so such a key pressed on the graph does nothing at all. Modified keys, Escape and Shift+Enter still reach the notebook. JupyterLab
  // reads keys as they bubble, so stopping them at the root is enough there. Notebook 7 reads
  // them on the way down, before any element: there the focused element carries Lumino's mark
  // that its shortcuts skip, set for each key the view keeps by a listener on the window, which
  // sees a key first.
  const viewsKey = (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.key === "Escape") return false;
    return !(ev.key === "Enter" && ev.shiftKey);
  };
  const markKept = (ev) => {
    const target = ev.target;
    if (!(target instanceof Element) || !root.contains(target)) return;
    if (viewsKey(ev)) target.setAttribute("data-lm-suppress-shortcuts", "true");
    else target.removeAttribute("data-lm-suppress-shortcuts");
  };
  window.addEventListener("keydown", markKept, true);
  root.addEventListener("keydown", (ev) => {
    if (viewsKey(ev)) ev.stopPropagation();
  });

  // --- evidence ----------------------------------------------------------------------------------
  const evTitle = h("h3", "fm-section-title", "Evidence");
  const evList = h("div", "fm-evidence-list fm-evidence-table");
  const evMore = h("div", "fm-evidence-more");
  evidence.append(evTitle, evList, evMore);
  let showAll = false;
  const open = new Set();
  function evidenceRow(r) {
    const [seq, time, node, st, method, summary] = r;
    const row = h("div", "fm-evidence-row");
    row.dataset.node = node;
    row.dataset.seq = String(seq);
    const line = h("button", "fm-evidence-line");
    line.type = "button";
    line.append(h("span", "fm-ev-time", time), h("span", "fm-ev-node", node),
      h("span", "fm-ev-status", st), h("span", "fm-ev-method", method), h("span", "fm-ev-summary", summary));
    line.querySelector(".fm-ev-status").dataset.status = st;
    const body = h("div", "fm-evidence-detail");
    body.hidden = true;
    line.onclick = () => {
      if (body.hidden) {
        open.add(seq);
        body.hidden = false;
        row.classList.add("fm-open");
        if (!body.firstChild) { body.append(h("div", "fm-muted", "loading…")); send({ action: "evidence_detail", seq }); }
      } else {
        open.delete(seq);
        body.hidden = true;
        row.classList.remove("fm-open");
      }
    };
    row.append(line, body);
    if (open.has(seq)) { body.hidden = false; row.classList.add("fm-open"); send({ action: "evidence_detail", seq }); }
    return row;
  }
  function drawEvidence(rows, total) {
    if (!rows.length) {
      evList.replaceChildren(h("div", "fm-evidence-empty fm-muted", "no evidence records yet"));
      evMore.replaceChildren();
      return;
    }
    evList.replaceChildren(...rows.map(evidenceRow));
    if (total > rows.length) {
      const more = btn(`show all ${total}`, "fm-evidence-all", "List every record of this run");
      more.onclick = () => { showAll = true; send({ action: "evidence_all" }); };
      evMore.replaceChildren(h("span", "fm-muted", `newest ${rows.length} of ${total} `), more);
    } else if (showAll && total > 8) {
      const less = btn("show fewer", "fm-evidence-fewer");
      less.onclick = () => { showAll = false; applyEvidence(); };
      evMore.replaceChildren(less);
    } else {
      evMore.replaceChildren();
    }
    lockControls();
  }
  function applyEvidence() {
    const ev = model.get("evidence") || {};
    if (showAll && (ev.total || 0) > (ev.rows || []).length) { send({ action: "evidence_all" }); return; }
    drawEvidence(ev.rows || [], ev.total || 0);
  }

  // --- condition playground ----------------------------------------------------------------------
  const playTitle = h("h3", "fm-section-title", "Condition playground");
  const playRow = h("div", "fm-playground-row");
  const playInputBox = h("span", "fm-playground-input");
  const playInput = h("input", "fm-input");
  playInput.placeholder = "outcome=success && context.tests.passed=true";
  playInput.spellcheck = false;
  playInput.autocomplete = "off";
  playInputBox.append(playInput);
  const playNodeBox = h("span", "fm-playground-node");
  const playNode = h("select");
  playNode.title = "the node whose outgoing edge is chosen";
  playNodeBox.append(playNode);
  playRow.append(playInputBox, h("span", "fm-muted", "from"), playNodeBox);
  const suggest = h("ul", "fm-suggest");
  suggest.hidden = true;
  const playResult = h("div", "fm-playground-result");
  const keysBox = h("details", "fm-context-keys");
  const keysSummary = h("summary", "", "context keys");
  const keysTable = h("table", "fm-keys");
  keysBox.append(keysSummary, keysTable);
  playground.append(playTitle, playRow, suggest, playResult, keysBox);
  let keys = [];
  let playTimer = null;
  function askPlayground() {
    clearTimeout(playTimer);
    playTimer = setTimeout(() => send({ action: "playground", expr: playInput.value, node: playNode.value || null }), 120);
  }
  function currentToken() {
    const pos = playInput.selectionStart ?? playInput.value.length;
    const before = playInput.value.slice(0, pos);
    const m = /([A-Za-z0-9_.]*)$/.exec(before);
    return { start: pos - m[1].length, end: pos, text: m[1] };
  }
  function showSuggestions() {
    const tok = currentToken();
    const items = tok.text.length ? keys.filter(([k]) => k.startsWith(tok.text) && k !== tok.text).slice(0, 8) : [];
    suggest.replaceChildren(...items.map(([k, v], i) => {
      const li = h("li", i === 0 ? "fm-suggest-item fm-active" : "fm-suggest-item");
      li.dataset.key = k;
      li.append(h("span", "fm-suggest-key", k), h("span", "fm-suggest-value", v));
      li.onmousedown = (ev) => { ev.preventDefault(); complete(k); };
      return li;
    }));
    suggest.hidden = !items.length;
  }
  function complete(key) {
    const tok = currentToken();
    const v = playInput.value;
    playInput.value = v.slice(0, tok.start) + key + v.slice(tok.end);
    const pos = tok.start + key.length;
    playInput.setSelectionRange(pos, pos);
    suggest.hidden = true;
    askPlayground();
  }
  playInput.addEventListener("input", () => { showSuggestions(); askPlayground(); });
  playInput.addEventListener("keydown", (ev) => {
    if (suggest.hidden) return;
    const items = [...suggest.children];
    const active = items.findIndex((x) => x.classList.contains("fm-active"));
    if (ev.key === "Tab" || ev.key === "Enter") {
      if (active >= 0) { ev.preventDefault(); complete(items[active].dataset.key); }
    } else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      const next = (active + (ev.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      items.forEach((x, i) => x.classList.toggle("fm-active", i === next));
    } else if (ev.key === "Escape") {
      suggest.hidden = true;
    }
  });
  playInput.addEventListener("blur", () => { suggest.hidden = true; });
  playNode.addEventListener("change", askPlayground);
  function showPlayground(reply) {
    playResult.replaceChildren(h("pre", "fm-playground-text", reply.text || ""));
    keys = reply.keys || [];
    keysTable.replaceChildren(...keys.map(([k, v]) => {
      const tr = h("tr");
      tr.append(h("td", "fm-key", k), h("td", "fm-val", v));
      return tr;
    }));
    keysSummary.textContent = `context keys (${keys.length})`;
    for (const e of view.edges) e.classList.remove("fm-chosen");
    playResult.dataset.edge = "";
    if (reply.edge) {
      const e = view.edges.find((x) => x.dataset.index === String(reply.edge.index));
      if (e) e.classList.add("fm-chosen");
      if (reply.edge.source !== view.playedFrom) scrollToNode(reply.edge.source, "follow");
      view.playedFrom = reply.edge.source;
      playResult.dataset.edge = `${reply.edge.source}->${reply.edge.target}`;
    }
    if (document.activeElement === playInput) showSuggestions();
  }

  // --- messages from the kernel ------------------------------------------------------------------
  function onCustom(msg) {
    if (!msg || typeof msg !== "object") return;
    answered();
    if (msg.reply === "done" || msg.reply === "error") {
      view.acting = false;
      view.asked = false; // its updates came first: a gate reached later is not this click's
      applyRun();
      restoreFocus();
    }
    if (msg.reply === "done" && msg.line !== undefined) showSaid(msg.line || "", msg.text || "");
    if (msg.reply === "done" && msg.action === "reset") { // a new run: no edge was taken yet
      for (const e of view.edges) e.classList.remove("fm-chosen");
      playResult.dataset.edge = "";
      playResult.replaceChildren();
      view.playedFrom = null;
    }
    if (msg.reply === "done" && msg.action === "run_to") { // reached: the list starts over
      const exits = (model.get("graph") || {}).exits || [];
      if (exits[0]) runToSel.value = exits[0];
    }
    if (msg.reply === "details") showDetails(msg.node, msg.data);
    else if (msg.reply === "playground") showPlayground(msg);
    else if (msg.reply === "evidence_all") drawEvidence(msg.rows || [], (msg.rows || []).length);
    else if (msg.reply === "evidence_detail") {
      const body = evList.querySelector(`.fm-evidence-row[data-seq="${CSS.escape(String(msg.seq))}"] .fm-evidence-detail`);
      if (body) body.replaceChildren(msg.record ? value(msg.record) : h("div", "fm-muted", msg.note || "not available"));
    } else if (msg.reply === "error") {
      showRefusal(msg.text || "error");
      showError(msg.text || "error");
    }
    else if (msg.reply === "done" && view.selected) send({ action: "details", node: view.selected });
  }
  model.on("msg:custom", onCustom);

  stepB.onclick = () => send({ action: "step" });
  runB.onclick = () => send({ action: "run" });
  runToB.onclick = () => send({ action: "run_to", node: runToSel.value });
  stopB.onclick = () => send({ action: "stop" });
  acceptB.onclick = () => send({ action: "accept", node: null });
  resetB.onclick = () => send({ action: "reset" });

  const handlers = [
    ["change:graph", loadGraph], ["change:states", applyStates], ["change:notes", applyStates],
    ["change:run", applyRun], ["change:banner", applyBanner], ["change:gate", applyGate],
    ["change:evidence", applyEvidence], ["change:note", applyNote],
  ];
  for (const entry of handlers) {
    const fn = entry[1];
    entry[1] = () => { answered(); fn(); };
  }
  for (const [name, fn] of handlers) model.on(name, fn);
  model.on("comm_live_update", onCommLive);
  loadGraph();
  applyRun();
  applyBanner();
  applyGate();
  applyEvidence();
  applyNote();

  return () => {
    clearInterval(ticker);
    model.off("comm_live_update", onCommLive);
    clearTimeout(view.waiting);
    resize.disconnect();
    window.removeEventListener("pointermove", onPointerMove);
    window.removeEventListener("pointerup", onPointerUp);
    window.removeEventListener("keydown", markKept, true);
    model.off("msg:custom", onCustom);
    for (const [name, fn] of handlers) model.off(name, fn);
  };
}

export default { render };
