// approval_guard review page.
//
// Arguments come from a model and may carry hostile text, so the DOM is built
// only with createElement/textContent: no innerHTML, no eval, nothing inline
// (the page's Content-Security-Policy forbids inline scripts and styles anyway).
//
// The page never renders a provider value itself. JSON.parse would round
// 9007199254740993 to ...992 and turn a 400-digit integer or 1e400 into
// Infinity, and JavaScript has no reliable list of invisible characters. So
// every text shown (tool, arguments, note, decider, cancel reason) is the
// provider's request.display form: written by the same code that writes the
// echo the agent checks, with bidi and invisible characters escaped. A request
// without it is not shown and cannot be approved.
// Every API call sends the session cookie plus the X-CSRF-Token header read from
// the page's <meta name="csrf-token">; the server refuses the cookie without it.
//
// Editable arguments (API 1.1): each is an input prefilled with display.editable's
// exact JSON text. What the reviewer typed goes back as that text, to the page's
// own /review/requests/{id}/decision, and the server parses it: a number typed
// here never passes through a JavaScript number. A redacted value is shown as
// the server's "‹redacted …›" text and is never an input.
//
// API 1.3: display.context is the agent's own stated reason, shown above the
// arguments under "The agent says:" (as text, like everything else; nothing is
// decided from it). Pending requests of one agent's batch (display.batch_group)
// are shown together under a bar with "Approve all N" / "Deny all N", which
// posts exactly the ids shown at that moment to POST /v1/decisions (session
// cookie and CSRF header, as every call): a request that joins later is not in it.
"use strict";

(() => {
  const CSRF_TOKEN = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const VALID_FOR_CHOICES = [
    ["1m", "1 minute"],
    ["5m", "5 minutes"],
    ["15m", "15 minutes"],
    ["30m", "30 minutes"],
    ["1h", "1 hour"],
    ["4h", "4 hours"],
  ];
  const DEFAULT_VALID_FOR = "5m";
  const DONE_PAGE = 50; // closed requests shown below the pending ones, and per "Show older"
  const MAX_PAGE = 1000; // the provider's largest list page
  const PENDING = "pending";
  const CLOSED = "approved,denied,expired,cancelled";
  const EVENTS_WAIT = "25s";
  const URGENT_MS = 60 * 1000;
  const BASE_TITLE = document.title;

  const el = (id) => document.getElementById(id);
  const pendingList = el("pending");
  const doneList = el("done");

  /** Server clock minus browser clock, in ms, so countdowns follow the provider's clock. */
  let clockOffsetMs = 0;
  /** id -> {card, request, countdown, buttons, note, error} for pending cards on screen. */
  const pendingCards = new Map();
  /** batch group -> {node, ids, ...} for the bars above a batch's pending cards. */
  const batchBars = new Map();
  /** How many closed requests to show; "Show older" raises it. */
  let doneWanted = DONE_PAGE;
  let doneSignature = "";
  let nextElementId = 0;
  let refreshQueued = null;
  /** The request a link points at (a webhook's ?request=<id>): highlighted, scrolled to once. */
  const WANTED_REQUEST = new URLSearchParams(location.search).get("request");
  let wantedShown = false;

  class ApiError extends Error {
    constructor(status, type, message) {
      super(message);
      this.status = status;
      this.type = type;
    }
  }

  // ---------------------------------------------------------------- API

  async function api(method, path, body) {
    const headers = { Accept: "application/json", "X-CSRF-Token": CSRF_TOKEN };
    const init = { method, headers, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      // Paths are written from the provider's root and fetched relative to this page
      // (served at the root), so the page works under a reverse proxy's path prefix.
      response = await fetch("." + path, init);
    } catch (_err) {
      throw new ApiError(0, "network",
        "The provider is not answering. Is `approval-guard serve` still running?");
    }
    noteServerClock(response);
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_err) {
        data = null;
      }
    }
    if (!response.ok) {
      const err = (data && typeof data.error === "object" && data.error) || {};
      const type = typeof err.type === "string" ? err.type : `http_${response.status}`;
      let message = typeof err.message === "string" && err.message
        ? err.message
        : `The provider answered HTTP ${response.status}.`;
      if (response.status === 401) {
        message = "Your session has ended. Open the reviewer link again to sign in.";
      }
      throw new ApiError(response.status, type, message);
    }
    return data;
  }

  function noteServerClock(response) {
    const header = response.headers.get("Date");
    if (!header) return;
    const server = Date.parse(header);
    if (Number.isNaN(server)) return;
    const offset = server - Date.now();
    // The Date header has one-second resolution: only correct clocks that really differ.
    clockOffsetMs = Math.abs(offset) > 1500 ? offset : 0;
  }

  function now() {
    return Date.now() + clockOffsetMs;
  }

  function asList(data, ...keys) {
    if (Array.isArray(data)) return data;
    if (data && typeof data === "object") {
      for (const key of keys) {
        if (Array.isArray(data[key])) return data[key];
      }
    }
    return [];
  }

  // ---------------------------------------------------------------- formatting

  function formatLeft(ms) {
    if (ms <= 0) return "deadline passed";
    const total = Math.floor(ms / 1000);
    const h = Math.floor(total / 3600);
    const m = Math.floor((total % 3600) / 60);
    const s = total % 60;
    const pad = (n) => String(n).padStart(2, "0");
    if (h > 0) return `${h}h ${pad(m)}m ${pad(s)}s left`;
    if (m > 0) return `${m}m ${pad(s)}s left`;
    return `${s}s left`;
  }

  function formatTime(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return String(iso || "");
    const d = new Date(t);
    const sameDay = new Date().toDateString() === d.toDateString();
    return sameDay
      ? d.toLocaleTimeString()
      : `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
  }

  const NOT_SHOWN = "(not shown: the provider sent no display form for this request)";

  /** A display list (absent means empty) of items with these string keys, or null. */
  function textList(value, keys) {
    if (value === undefined) return [];
    if (!Array.isArray(value)) return null;
    const ok = value.every((item) => (keys.length === 0
      ? typeof item === "string"
      : item && typeof item === "object" && keys.every((key) => typeof item[key] === "string")));
    return ok ? value : null;
  }

  /** The display texts of a request, or null for any that is missing or not a string. */
  function shown(request) {
    const d = request.display;
    const text = (value) => (typeof value === "string" ? value : null);
    const optional = (value) => (value === null || value === undefined ? "" : text(value));
    if (!d || typeof d !== "object") return null;
    const out = {
      tool: text(d.tool),
      arguments: text(d.arguments),
      note: optional(d.note),
      decidedBy: optional(d.decided_by),
      cancelReason: optional(d.cancel_reason),
      context: d.context === undefined ? null : text(d.context),
      batch: optional(d.batch),
      batchGroup: optional(d.batch_group),
      redacted: textList(d.redacted, []),
      editable: textList(d.editable, ["name", "text"]),
      changes: textList(d.changes, ["name", "before", "after"]),
    };
    const hasContext = d.context !== undefined;
    if (!Object.entries(out).every(([key, value]) => value !== null || (key === "context" && !hasContext))) {
      return null;
    }
    // Each input sends its edit under the request's own (unescaped) name: the two
    // lists must match one to one, or the page does not know what it would send.
    const names = request.editable === undefined ? [] : request.editable;
    if (!Array.isArray(names) || names.length !== out.editable.length
      || !names.every((name) => typeof name === "string")) return null;
    out.editableNames = names;
    return out;
  }

  // ---------------------------------------------------------------- DOM helpers

  function make(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null) continue;
        if (key === "text") node.textContent = String(value);
        else if (key === "className") node.className = value;
        else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
        else if (key in node && typeof node[key] === "boolean") node[key] = Boolean(value);
        else node.setAttribute(key, String(value));
      }
    }
    for (const child of children) {
      if (child !== null && child !== undefined && child !== false) {
        node.append(child); // strings become text nodes, never markup
      }
    }
    return node;
  }

  function freshId(prefix) {
    nextElementId += 1;
    return `${prefix}-${nextElementId}`;
  }

  function showError(message) {
    const line = el("error");
    line.textContent = message;
    line.hidden = false;
  }

  function clearError() {
    const line = el("error");
    line.textContent = "";
    line.hidden = true;
  }

  function showNotice(text) {
    const line = el("notice");
    line.textContent = text;
    line.hidden = false;
  }

  function setLive(state) {
    const live = el("live");
    live.dataset.state = state;
    live.textContent = {
      live: "Live: updates by itself",
      connecting: "Connecting…",
      offline: "Offline: retrying…",
      finished: "Finished: the provider has stopped",
    }[state];
  }

  function badge(status) {
    return make("span", { className: `badge badge-${status}`, "data-testid": "status", text: status });
  }

  function metaLine(request) {
    return make("p", { className: "meta" },
      `Requested ${formatTime(request.created_at)} · deadline ${formatTime(request.deadline_at)}`
      + ` · timeout ${request.timeout} · id `,
      make("span", { className: "mono", text: request.id }));
  }

  function redactedNotice(texts) {
    if (!texts || texts.redacted.length === 0) return null;
    return make("p", { className: "redacted-notice", "data-testid": "redacted" },
      make("span", { className: "redacted-tag", text: "Redacted" }),
      " Hidden from you by the agent's side, shown as ‹redacted …›; the tool gets the real"
      + " values: ",
      make("span", { className: "mono", text: texts.redacted.join(", ") }));
  }

  /** The agent's own stated reason (API 1.3), labelled as its words, or null without one. */
  function agentSays(texts) {
    if (!texts || texts.context === null) return null;
    return make("div", { className: "agent-says", "data-testid": "context" },
      make("p", { className: "args-label", text: "The agent says:" }),
      make("blockquote", { className: "agent-says-text" },
        make("pre", { className: "args", "data-testid": "context-text", text: texts.context })));
  }

  /** One input per editable argument, prefilled with its exact JSON text. */
  function buildEdits(texts) {
    if (!texts || texts.editable.length === 0) return { node: null, fields: [] };
    const fields = [];
    const rows = texts.editable.map((item, index) => {
      const inputId = freshId("edit");
      const lines = item.text.split("\n").length;
      const input = make("textarea", {
        id: inputId, className: "edit-input mono", rows: Math.min(Math.max(lines, 1), 8),
        spellcheck: false, autocomplete: "off", "data-testid": "edit",
        "data-name": item.name,
      });
      input.value = item.text;
      const mark = make("span", { className: "edit-changed", "data-testid": "edit-changed",
        text: "changed", hidden: true });
      input.addEventListener("input", () => {
        const changed = input.value !== item.text;
        input.dataset.changed = String(changed);
        mark.hidden = !changed;
      });
      fields.push({ name: texts.editableNames[index], input });
      return make("div", { className: "field edit-field" },
        make("label", { for: inputId },
          make("span", { className: "mono edit-name", text: item.name }), " ", mark),
        input);
    });
    const node = make("fieldset", { className: "edits", "data-testid": "edits" },
      make("legend", { text: "You may change these before approving (as JSON)" }),
      ...rows);
    return { node, fields };
  }

  function changesList(texts) {
    if (!texts || texts.changes.length === 0) return null;
    return make("div", { className: "changes", "data-testid": "changes" },
      make("p", { className: "args-label", text: "Changed by the reviewer before approving" }),
      make("ul", { className: "change-list" },
        ...texts.changes.map((change) => make("li", { className: "change", "data-testid": "change" },
          make("span", { className: "mono change-name", "data-testid": "change-name", text: change.name }),
          make("pre", { className: "args change-before", "data-testid": "change-before", text: change.before }),
          make("span", { className: "change-arrow", "aria-label": "became", text: "→" }),
          make("pre", { className: "args change-after", "data-testid": "change-after", text: change.after })))));
  }

  // ---------------------------------------------------------------- pending cards

  function buildPendingCard(request) {
    const texts = shown(request);
    const noteId = freshId("note");
    const validId = freshId("valid");
    const argsId = freshId("args");

    const countdown = make("span", {
      className: "countdown", role: "timer", "data-testid": "time-left",
      "aria-label": "Time left to decide",
    });
    const note = make("textarea", {
      id: noteId, rows: 2, maxlength: 2000, "data-testid": "note",
      placeholder: "Why you approve or deny: the agent sees this note",
    });
    const select = make("select", { id: validId, "data-testid": "valid-for" });
    for (const [value, label] of VALID_FOR_CHOICES) {
      select.append(make("option", { value, text: label, selected: value === DEFAULT_VALID_FOR }));
    }
    const approve = make("button", {
      type: "submit", className: "btn btn-approve", "data-testid": "approve", text: "Approve",
      disabled: texts === null, // what is not shown cannot be approved
    });
    const deny = make("button", {
      type: "button", className: "btn btn-deny", "data-testid": "deny", text: "Deny",
    });
    const error = make("p", { className: "card-error", role: "alert", "data-testid": "card-error", hidden: true });
    const edits = buildEdits(texts);
    // Several approvals (a rules file's approvals_required): how far it has come, and
    // why this reviewer may not decide (from the page backend; never worked out here).
    const approvals = make("p", { className: "approvals", "data-testid": "approvals" });
    const readOnly = make("p", { className: "read-only", role: "note", "data-testid": "read-only" });
    const audit = auditTrail(request.id);
    const grantOffer = texts === null ? null : buildGrantOffer(request);

    const form = make("form", { className: "decide", novalidate: true },
      make("div", { className: "field field-note" },
        make("label", { for: noteId }, "Note ",
          make("span", { className: "hint", text: "(optional to approve, required to deny)" })),
        note),
      make("div", { className: "field valid-for" },
        make("label", { for: validId, text: "Approval stays valid for" }), select),
      make("div", { className: "buttons" }, deny, approve),
      grantOffer ? grantOffer.node : null,
      error);

    const card = make("li", {
      className: "card", "data-status": "pending", "data-testid": `request-${request.id}`,
      "data-request-id": request.id,
      "aria-label": `Pending request to call ${texts ? texts.tool : "an unshown tool"}`,
    },
    make("div", { className: "card-head" },
      make("h3", { className: "tool", "data-testid": "tool", text: texts ? texts.tool : NOT_SHOWN }),
      countdown),
    metaLine(request),
    agentSays(texts),
    make("p", { className: "args-label", id: argsId,
      text: edits.node ? "Arguments as requested" : "Arguments" }),
    make("pre", {
      className: "args", "aria-labelledby": argsId, "data-testid": "arguments",
      text: texts ? texts.arguments : NOT_SHOWN,
    }),
    redactedNotice(texts),
    approvals,
    edits.node,
    readOnly,
    form,
    audit);

    const entry = {
      card, request, countdown, buttons: [approve, deny], note, error, busy: false,
      unshown: texts === null, edits: edits.fields, editsNode: edits.node, approvals, readOnly,
      form, audit,
    };
    updateTeam(entry, request);

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      decide(entry, "approved", select.value);
    });
    deny.addEventListener("click", () => decide(entry, "denied", null));
    if (grantOffer) {
      entry.buttons.push(grantOffer.button);
      grantOffer.button.addEventListener("click", () => decideWithGrant(entry, select.value, grantOffer));
    }
    updateCountdown(entry);
    return entry;
  }

  function setBusy(entry, busy) {
    entry.busy = busy;
    for (const button of entry.buttons) button.disabled = busy || entry.pastDeadline;
    for (const field of entry.edits) field.input.readOnly = busy || Boolean(entry.pastDeadline);
    if (entry.unshown) entry.buttons[0].disabled = true;
  }

  function showCardError(entry, message) {
    entry.error.textContent = message;
    entry.error.hidden = !message;
  }

  async function decide(entry, status, validFor) {
    if (entry.busy || (status === "approved" && entry.unshown)) return;
    const note = entry.note.value.trim();
    if (status === "denied" && !note) {
      showCardError(entry, "Write a note to deny: it tells the agent why the call did not run.");
      entry.note.focus();
      return;
    }
    showCardError(entry, "");
    setBusy(entry, true);
    const body = { status, note: note || null };
    if (status === "approved") {
      body.valid_for = validFor || DEFAULT_VALID_FOR;
      if (entry.edits.length > 0 && entry.editsAllowed) {
        // No prototype: an argument named "__proto__" is then a key like any other.
        const edits = Object.create(null);
        for (const field of entry.edits) edits[field.name] = field.input.value;
        body.edits = edits;
      }
    }
    try {
      await api("POST", `/review/requests/${encodeURIComponent(entry.request.id)}/decision`, body);
    } catch (err) {
      if (err.type === "not_pending") {
        showCardError(entry, "This request is no longer pending; refreshing.");
      } else {
        showCardError(entry, `Could not record the decision: ${err.message}`);
        setBusy(entry, false);
        return;
      }
    }
    await refreshSafely();
    // Still pending (one approval of several): the card is the page's again.
    if (pendingCards.get(entry.request.id) === entry) setBusy(entry, false);
  }

  function updateCountdown(entry) {
    const deadline = Date.parse(entry.request.deadline_at);
    const left = Number.isNaN(deadline) ? 0 : deadline - now();
    entry.countdown.textContent = formatLeft(left);
    entry.countdown.dataset.urgent = String(left < URGENT_MS);
    const past = left <= 0;
    if (past && !entry.pastDeadline) {
      entry.pastDeadline = true;
      setBusy(entry, entry.busy);
      // The provider expires it; fetch the new state shortly after.
      scheduleRefresh(1200);
    }
  }

  /** The "1 of 2 approvals" line and the read-only reason, kept current on every update. */
  function updateTeam(entry, request) {
    const d = request.display || {};
    const count = typeof d.approvals === "string" ? d.approvals : "";
    // A new approval is a new audit row: an open trail shows it without being reopened.
    if (entry.approvals.textContent !== count) entry.audit.reload();
    entry.approvals.textContent = count;
    entry.approvals.hidden = !count;
    const why = typeof d.read_only === "string" ? d.read_only : "";
    entry.readOnly.textContent = why ? `You cannot decide this request: ${why}` : "";
    entry.readOnly.hidden = !why;
    entry.form.hidden = Boolean(why);
    // No edit inputs where none may be sent: this reviewer may not decide, or several
    // people must approve (the provider refuses an edit then: whose edit would it be?).
    entry.editsAllowed = !why && !count;
    if (entry.editsNode) entry.editsNode.hidden = !entry.editsAllowed;
  }

  /**
   * A request's audit rows, fetched when the reviewer opens them and again on
   * reload() while open. Each line is the provider's row.display (names with
   * hidden characters escaped), never the raw actor.
   */
  function auditTrail(requestId) {
    const list = make("ol", { className: "audit", "data-testid": "audit" });
    const details = make("details", { className: "audit-trail" },
      make("summary", { text: "Audit trail" }), list);
    let loading = null;
    let again = false;
    async function load() {
      try {
        const history = await api("GET", `/v1/requests/${encodeURIComponent(requestId)}/history`);
        const rows = Array.isArray(history && history.audit) ? history.audit : [];
        list.replaceChildren(...rows.map((row) => make("li", {
          text: `${formatTime(row && row.at)} · `
            + (row && typeof row.display === "string" ? row.display : "(not shown)"),
        })));
      } catch (err) {
        list.replaceChildren(make("li", { text: err.message }));
      }
    }
    function reload() {
      if (!details.open) return;
      if (loading) { // one fetch at a time; the last change is fetched after it
        again = true;
        return;
      }
      loading = load().finally(() => {
        loading = null;
        if (again) {
          again = false;
          reload();
        }
      });
    }
    details.addEventListener("toggle", reload);
    details.reload = reload;
    return details;
  }

  /**
   * The batch group of a pending request (API 1.3), or "" when it has none. A
   * request the page cannot show is in no group: what is not shown is never
   * approved, alone or with others.
   */
  function groupOf(request) {
    const d = request.display;
    if (shown(request) === null) return "";
    return d && typeof d.batch_group === "string" && typeof d.batch === "string" ? d.batch_group : "";
  }

  /**
   * The bar above a batch's pending cards: "Approve all N" / "Deny all N". Its
   * ids are set on every render to exactly the cards shown under it, and a click
   * posts those ids, never "whatever is in the batch now".
   */
  function buildBatchBar(group, batchText) {
    const noteId = freshId("note");
    const validId = freshId("valid");
    const note = make("textarea", {
      id: noteId, rows: 1, maxlength: 2000, "data-testid": "batch-note",
      placeholder: "One note for all of them (required to deny)",
    });
    const select = make("select", { id: validId, "data-testid": "batch-valid-for" });
    for (const [value, label] of VALID_FOR_CHOICES) {
      select.append(make("option", { value, text: label, selected: value === DEFAULT_VALID_FOR }));
    }
    const title = make("h3", { className: "batch-title", "data-testid": "batch-title" });
    const approve = make("button", {
      type: "button", className: "btn btn-approve", "data-testid": "approve-all",
    });
    const deny = make("button", { type: "button", className: "btn btn-deny", "data-testid": "deny-all" });
    const error = make("p", { className: "card-error", role: "alert", "data-testid": "batch-error", hidden: true });
    const node = make("li", { className: "batch-bar", "data-testid": "batch", "data-batch-group": group },
      title,
      make("p", { className: "meta", text: "These requests came from one agent's turn. "
        + "Each is decided as if alone: its own rules, its own audit row." }),
      make("div", { className: "decide" },
        make("div", { className: "field field-note" },
          make("label", { for: noteId, text: "Note" }), note),
        make("div", { className: "field valid-for" },
          make("label", { for: validId, text: "Approvals stay valid for" }), select),
        make("div", { className: "buttons" }, deny, approve)),
      error);
    const bar = { node, ids: [], note, select, approve, deny, error, title, batchText, busy: false };
    approve.addEventListener("click", () => decideAll(bar, "approved"));
    deny.addEventListener("click", () => decideAll(bar, "denied"));
    return bar;
  }

  function updateBatchBar(bar, ids) {
    bar.ids = ids.slice();
    const n = ids.length;
    bar.title.textContent = `Batch ${bar.batchText} · ${n} pending requests from one agent`;
    bar.approve.textContent = `Approve all ${n}`;
    bar.deny.textContent = `Deny all ${n}`;
    bar.node.dataset.ids = ids.join(",");
  }

  /** What one "Approve all" / "Deny all" did, kept on screen (the bar goes with its cards). */
  function showBatchOutcome(bar, status, ids, results) {
    const refused = results.filter((one) => one && typeof one === "object" && one.error);
    const verb = status === "approved" ? "Approve" : "Deny";
    const summary = `${verb} all ${ids.length} (batch ${bar.batchText}): `
      + (refused.length === 0 ? "each one recorded." : `${refused.length} of ${ids.length} not decided:`);
    const outcome = el("batch-outcome");
    outcome.replaceChildren(make("p", { text: summary }),
      make("ul", {}, ...refused.map((one) => make("li", {
        "data-testid": "batch-result",
        text: `${String(one.id)}: ${one.error && typeof one.error.message === "string" ? one.error.message : "refused"}`,
      }))));
    outcome.hidden = false;
  }

  async function decideAll(bar, status) {
    if (bar.busy) return;
    const ids = bar.ids.slice(); // exactly the cards shown under the bar now
    const note = bar.note.value.trim();
    if (status === "denied" && !note) {
      bar.error.textContent = "Write a note to deny: it tells the agent why the calls did not run.";
      bar.error.hidden = false;
      bar.note.focus();
      return;
    }
    bar.error.hidden = true;
    bar.busy = true;
    bar.approve.disabled = true;
    bar.deny.disabled = true;
    const body = { ids, status, note: note || null };
    if (status === "approved") body.valid_for = bar.select.value || DEFAULT_VALID_FOR;
    try {
      const data = await api("POST", "/v1/decisions", body);
      showBatchOutcome(bar, status, ids, asList(data, "results"));
    } catch (err) {
      bar.error.textContent = `Could not record the decisions: ${err.message}`;
      bar.error.hidden = false;
    }
    bar.busy = false;
    bar.approve.disabled = false;
    bar.deny.disabled = false;
    await refreshSafely();
  }

  function renderPending(requests) {
    const wanted = new Set(requests.map((r) => r.id));
    for (const [id, entry] of pendingCards) {
      if (!wanted.has(id)) {
        entry.card.remove();
        pendingCards.delete(id);
      }
    }
    // A batch's pending requests together, under their bar, where its newest one is.
    const groups = new Map();
    for (const request of requests) {
      const group = groupOf(request);
      if (!group) continue;
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(request);
    }
    const items = [];
    const placed = new Set();
    for (const request of requests) {
      if (placed.has(request.id)) continue;
      const members = groups.get(groupOf(request)) || [];
      if (members.length < 2) {
        items.push({ request });
        continue;
      }
      const group = groupOf(request);
      items.push({ bar: group, batchText: request.display.batch, ids: members.map((r) => r.id) });
      for (const member of members) {
        items.push({ request: member });
        placed.add(member.id);
      }
    }
    const barsWanted = new Set(items.filter((item) => item.bar).map((item) => item.bar));
    for (const [group, bar] of batchBars) {
      if (!barsWanted.has(group)) {
        bar.node.remove();
        batchBars.delete(group);
      }
    }
    // Keep existing cards in place (a half-written note survives an update);
    // only insert new ones and fix the order if it is wrong.
    let previous = null;
    for (const item of items) {
      let node;
      if (item.bar) {
        let bar = batchBars.get(item.bar);
        if (!bar) {
          bar = buildBatchBar(item.bar, item.batchText);
          batchBars.set(item.bar, bar);
        }
        updateBatchBar(bar, item.ids);
        node = bar.node;
      } else {
        const request = item.request;
        let entry = pendingCards.get(request.id);
        if (!entry) {
          entry = buildPendingCard(request);
          pendingCards.set(request.id, entry);
        } else {
          updateTeam(entry, request);
        }
        node = entry.card;
      }
      const expectedNext = previous ? previous.nextSibling : pendingList.firstChild;
      if (expectedNext !== node) pendingList.insertBefore(node, expectedNext);
      previous = node;
    }
    const count = requests.length;
    el("pending-count").textContent = String(count);
    el("pending-empty").hidden = count > 0;
    document.title = count > 0 ? `(${count}) ${BASE_TITLE}` : BASE_TITLE;
  }

  // ---------------------------------------------------------------- closed cards

  function outcomeLine(request, texts) {
    const decider = decidedThroughText(request) || (texts ? texts.decidedBy : "");
    const d = request.decision;
    if ((request.status === "approved" || request.status === "denied") && d) {
      const edited = request.status === "approved" && texts && texts.changes.length > 0;
      const verb = request.status === "approved" ? (edited ? "Approved with changes" : "Approved") : "Denied";
      let text = `${verb}${decider ? ` by ${decider}` : ""} at ${formatTime(d.decided_at)}`;
      if (request.status === "approved" && d.expires_at) {
        text += ` · the call had to start before ${formatTime(d.expires_at)}`;
      }
      return text;
    }
    if (request.status === "expired") {
      return `Expired undecided at ${formatTime(request.deadline_at)}: the call did not run.`;
    }
    if (request.status === "cancelled") {
      return `Cancelled by the agent's side${request.cancelled_at ? ` at ${formatTime(request.cancelled_at)}` : ""}: nobody was waiting any more.`;
    }
    return `Status: ${request.status}`;
  }

  function buildDoneCard(request) {
    const texts = shown(request);
    const outcome = make("p", { className: "outcome", "data-testid": "outcome", text: outcomeLine(request, texts) });
    const note = texts && texts.note;
    const reason = texts && request.status === "cancelled" && texts.cancelReason;
    return make("li", {
      className: "card card-done", "data-status": request.status,
      "data-testid": `request-${request.id}`, "data-request-id": request.id,
    },
    make("div", { className: "card-head" },
      make("h3", { className: "tool", "data-testid": "tool", text: texts ? texts.tool : NOT_SHOWN }),
      badge(request.status)),
    metaLine(request),
    agentSays(texts),
    outcome,
    note ? make("p", { className: "outcome-note", "data-testid": "decision-note", text: note }) : null,
    reason ? make("p", { className: "outcome-note", "data-testid": "cancel-reason", text: reason }) : null,
    changesList(texts),
    redactedNotice(texts),
    make("details", { className: "args-details" },
      make("summary", { text: texts && texts.changes.length > 0 ? "Arguments as requested" : "Arguments" }),
      make("pre", { className: "args", "data-testid": "arguments", text: texts ? texts.arguments : NOT_SHOWN })),
    auditTrail(request.id));
  }

  function renderDone(requests, more) {
    const signature = `${more}|` + requests.map((r) => `${r.id}:${r.status}`).join("|");
    el("done-more").hidden = !more;
    if (signature === doneSignature) return;

    // A rebuilt card keeps what the reviewer had opened (its arguments, its audit trail).
    const open = new Set();
    for (const card of doneList.children) {
      for (const details of card.querySelectorAll("details")) {
        if (details.open) open.add(`${card.dataset.requestId} ${details.className}`);
      }
    }
    const cards = requests.map((r) => {
      const card = buildDoneCard(r);
      for (const details of card.querySelectorAll("details")) {
        if (open.has(`${r.id} ${details.className}`)) details.open = true;
      }
      return card;
    });
    doneList.replaceChildren(...cards);
    el("done-empty").hidden = cards.length > 0;
    doneSignature = signature;
  }

  // ---------------------------------------------------------------- standing grants (API 1.3)
  //
  // "Approve, and allow calls like this for …" beside Approve, the follow-up offer
  // to decide the other pending requests a new grant covers, and the "Standing
  // grants" list. As everywhere on this page, every provider text shown is a
  // display form the server escaped (request.display.grant_offer, /review/grants'
  // display); constraints go back as JSON texts the server parses exactly
  // (grant.match_texts), so a bound never passes through a JavaScript number.

  const GRANT_KIND_WORDS = { range: "is a number in a range…", in: "is one of…", prefix: "starts with…" };
  const JSON_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
  const USES_TEXT = /^[1-9][0-9]{0,6}$/;
  const grantsList = el("grants");
  let grantsSignature = null;

  /** The offer's texts (GET /review/requests/{id}/grant-offer), checked; null: none offered. */
  function grantOfferTexts(offer) {
    const str = (value) => typeof value === "string";
    if (!offer || typeof offer !== "object") return null;
    if (!Array.isArray(offer.durations) || !offer.durations.every(str) || !str(offer.default)) return null;
    const argsOk = Array.isArray(offer.arguments) && offer.arguments.every((arg) => arg
      && str(arg.key) && str(arg.name) && str(arg.same) && str(arg.any)
      && Array.isArray(arg.kinds) && arg.kinds.every(str) && (arg.text === null || str(arg.text)));
    const by = offer.requested_by;
    if (!argsOk || !by || !str(by.same) || !str(by.any)) return null;
    return offer;
  }

  function grantInput(testid, label) {
    return make("input", {
      type: "text", className: "mono grant-input", "data-testid": testid, "aria-label": label,
      spellcheck: false, autocomplete: "off",
    });
  }

  /** One argument's constraint: a choice of same / any / range / one of / starts with. */
  function buildGrantArgument(arg) {
    const kindId = freshId("grant-kind");
    const kind = make("select", { id: kindId, "data-testid": "grant-kind", "data-name": arg.name });
    for (const value of arg.kinds) {
      const label = value === "same" ? arg.same
        : value === "any" ? arg.any : `${arg.name} ${GRANT_KIND_WORDS[value] || value}`;
      kind.append(make("option", { value, text: label }));
    }
    const min = grantInput("grant-min", `lowest ${arg.name}`);
    const max = grantInput("grant-max", `highest ${arg.name}`);
    const list = grantInput("grant-in", `values ${arg.name} may take, as a JSON list`);
    const prefix = grantInput("grant-prefix", `what ${arg.name} starts with, as a JSON string`);
    if (arg.text !== null) {
      min.value = arg.text;
      max.value = arg.text;
      list.value = `[${arg.text}]`;
      prefix.value = arg.text;
    }
    const details = {
      range: make("span", { className: "grant-detail" }, "from ", min, " to ", max,
        make("span", { className: "hint", text: " (leave one empty for no bound)" })),
      in: make("span", { className: "grant-detail" }, list,
        make("span", { className: "hint", text: " a JSON list, e.g. [\"GBP\", \"EUR\"]" })),
      prefix: make("span", { className: "grant-detail" }, prefix,
        make("span", { className: "hint", text: " a JSON string, in double quotes" })),
    };
    const sync = () => {
      for (const [name, node] of Object.entries(details)) node.hidden = kind.value !== name;
    };
    kind.addEventListener("change", sync);
    sync();

    /** {text, words} of the chosen constraint; throws an Error saying what is wrong. */
    function read() {
      const choice = kind.value;
      if (choice === "same") return { text: "\"same\"", words: arg.same };
      if (choice === "any") return { text: "\"any\"", words: arg.any };
      if (choice === "range") {
        const low = min.value.trim();
        const high = max.value.trim();
        if (!low && !high) throw new Error(`Give ${arg.name} a lowest or a highest value.`);
        for (const bound of [low, high]) {
          if (bound && !JSON_NUMBER.test(bound)) {
            throw new Error(`${arg.name}: ${bound} is not a number (write it as JSON, e.g. 1000 or 12.50).`);
          }
        }
        const parts = [];
        if (low) parts.push(`"min": ${low}`);
        if (high) parts.push(`"max": ${high}`);
        const words = low && high ? `from ${low} to ${high}` : (low ? `of at least ${low}` : `of at most ${high}`);
        return { text: `{${parts.join(", ")}}`, words: `${arg.name} is a number ${words}` };
      }
      if (choice === "in") {
        const text = list.value.trim();
        if (!text.startsWith("[") || !text.endsWith("]")) {
          throw new Error(`${arg.name}: write the values as a JSON list, e.g. ["GBP", "EUR"].`);
        }
        return { text: `{"in": ${text}}`, words: `${arg.name} is one of ${text.slice(1, -1)}` };
      }
      if (choice === "prefix") {
        const text = prefix.value.trim();
        if (text.length < 3 || !text.startsWith("\"") || !text.endsWith("\"")) {
          throw new Error(`${arg.name}: write the start as a JSON string in double quotes.`);
        }
        return { text: `{"prefix": ${text}}`, words: `${arg.name} starts with ${text}` };
      }
      throw new Error(`${arg.name}: choose what calls may pass for it.`);
    }

    const row = make("li", { className: "grant-arg", "data-testid": "grant-arg", "data-name": arg.name },
      make("label", { for: kindId, className: "mono grant-arg-name", text: arg.name }),
      kind, details.range, details.in, details.prefix);
    return { row, key: arg.key, read };
  }

  /**
   * "Approve, and allow calls like this for …" beside Approve. Its choices are
   * fetched when the reviewer opens it: a duration within the tool's max_grant,
   * optional uses, the scope per argument (in words, kept current) and whose calls.
   */
  function buildGrantOffer(request) {
    const body = make("div", { className: "grant-body" },
      make("p", { className: "hint", text: "Loading the choices…" }));
    const button = make("button", {
      type: "button", className: "btn btn-approve", "data-testid": "approve-grant",
      text: "Approve and allow", hidden: true,
    });
    // A button, not a <details>: a linked card opens its first <details> (the audit trail).
    const bodyId = freshId("grant-body");
    const toggle = make("button", {
      type: "button", className: "grant-toggle", "data-testid": "grant-offer-toggle",
      "aria-expanded": "false", "aria-controls": bodyId,
      text: "Approve, and allow calls like this for …",
    });
    const panel = make("div", { id: bodyId, className: "grant-panel", hidden: true },
      body, make("div", { className: "buttons" }, button));
    const node = make("div", { className: "grant-offer", "data-testid": "grant-offer" }, toggle, panel);
    let fields = null;
    let loading = false;
    toggle.addEventListener("click", async () => {
      const open = panel.hidden;
      panel.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      if (!open || fields !== null || loading) return;
      loading = true;
      try {
        const data = await api("GET",
          `/review/requests/${encodeURIComponent(request.id)}/grant-offer`);
        const offer = grantOfferTexts(data && data.offer);
        if (offer === null) {
          const why = data && typeof data.reason === "string" ? data.reason : "the provider offers none";
          body.replaceChildren(make("p", { className: "hint", "data-testid": "grant-unavailable",
            text: `No standing grant here: ${why}.` }));
          return;
        }
        fields = buildGrantFields(offer);
        body.replaceChildren(fields.node);
        button.hidden = false;
      } catch (err) {
        body.replaceChildren(make("p", { className: "card-error",
          text: `Could not load the choices: ${err.message}` }));
      } finally {
        loading = false;
      }
    });
    function read() {
      if (fields === null) throw new Error("Open the grant's choices first.");
      return fields.read();
    }
    return { node, button, read };
  }

  /** The grant's fields, built from the provider's offer; read() gives the grant to send. */
  function buildGrantFields(offer) {
    const forId = freshId("grant-for");
    const usesId = freshId("grant-uses");
    const byId = freshId("grant-by");
    const duration = make("select", { id: forId, "data-testid": "grant-for" });
    for (const value of offer.durations) {
      duration.append(make("option", { value, text: value, selected: value === offer.default }));
    }
    const uses = make("input", {
      id: usesId, type: "text", inputmode: "numeric", className: "grant-input",
      "data-testid": "grant-uses", placeholder: "no limit", autocomplete: "off",
    });
    const requestedBy = make("select", { id: byId, "data-testid": "grant-requested-by" },
      make("option", { value: "same", text: offer.requested_by.same }),
      make("option", { value: "any", text: offer.requested_by.any }));
    const args = offer.arguments.map(buildGrantArgument);
    const words = make("ul", { className: "grant-words", "data-testid": "grant-words" });

    /** The grant to send: {for, uses, requested_by, match_texts}; throws on a bad field. */
    function read() {
      const usesText = uses.value.trim();
      if (usesText && !USES_TEXT.test(usesText)) {
        throw new Error("Uses must be a whole number from 1, or empty for no limit.");
      }
      const matchTexts = Object.create(null); // "__proto__" is an argument like any other
      for (const arg of args) matchTexts[arg.key] = arg.read().text;
      return {
        for: duration.value,
        uses: usesText ? Number(usesText) : null,
        requested_by: requestedBy.value,
        match_texts: matchTexts,
      };
    }

    function describeNow() {
      const lines = [];
      for (const arg of args) {
        try {
          lines.push(arg.read().words);
        } catch (err) {
          lines.push(err.message);
        }
      }
      const usesText = uses.value.trim();
      lines.push(requestedBy.selectedOptions[0] ? requestedBy.selectedOptions[0].textContent : "");
      lines.push(`for ${duration.value}${usesText ? `, at most ${usesText} calls` : ", any number of calls"}`);
      words.replaceChildren(...lines.map((line) => make("li", { text: line })));
    }

    const node = make("div", { className: "grant-choices" },
      make("div", { className: "grant-fields" },
        make("div", { className: "field" }, make("label", { for: forId, text: "Allow for" }), duration),
        make("div", { className: "field" },
          make("label", { for: usesId, text: "Uses (optional)" }), uses),
        make("div", { className: "field" },
          make("label", { for: byId, text: "Whose calls" }), requestedBy)),
      make("p", { className: "args-label",
        text: "Calls like this: this tool, from the same agent, and for each argument" }),
      make("ul", { className: "grant-args" }, ...args.map((arg) => arg.row)),
      make("p", { className: "args-label", text: "Covered in words" }),
      words);
    node.addEventListener("input", describeNow);
    node.addEventListener("change", describeNow);
    describeNow();
    return { node, read };
  }

  /** Approve with a grant; then, if it covers other pending requests, offer to decide them. */
  async function decideWithGrant(entry, validFor, offer) {
    if (entry.busy || entry.unshown) return;
    let grant;
    try {
      grant = offer.read();
    } catch (err) {
      showCardError(entry, err.message);
      return;
    }
    showCardError(entry, "");
    setBusy(entry, true);
    const note = entry.note.value.trim();
    const body = { status: "approved", note: note || null, valid_for: validFor || DEFAULT_VALID_FOR, grant };
    if (entry.edits.length > 0 && entry.editsAllowed) {
      const edits = Object.create(null);
      for (const field of entry.edits) edits[field.name] = field.input.value;
      body.edits = edits;
    }
    let answer = null;
    try {
      answer = await api("POST", `/review/requests/${encodeURIComponent(entry.request.id)}/decision`, body);
    } catch (err) {
      if (err.type !== "not_pending") {
        showCardError(entry, `Could not record the decision: ${err.message}`);
        setBusy(entry, false);
        return;
      }
      showCardError(entry, "This request is no longer pending; refreshing.");
    }
    const given = answer && answer.grant;
    await refreshSafely();
    if (pendingCards.get(entry.request.id) === entry) setBusy(entry, false);
    if (given && typeof given.id === "string" && given.status === "live") await offerPendingCovered(given.id);
  }

  /** "This grant also covers N pending requests: decide them too?": applied only on a click. */
  async function offerPendingCovered(grantId) {
    const box = el("grant-followup");
    let ids;
    try {
      const shownGrant = await api("GET", `/v1/grants/${encodeURIComponent(grantId)}`);
      ids = Array.isArray(shownGrant && shownGrant.covers_pending)
        ? shownGrant.covers_pending.filter((id) => typeof id === "string") : [];
    } catch (_err) {
      return;
    }
    if (ids.length === 0) return;
    const count = ids.length === 1 ? "1 pending request" : `${ids.length} pending requests`;
    const result = make("p", { className: "hint", "data-testid": "grant-apply-result" });
    const yes = make("button", {
      type: "button", className: "btn btn-approve", "data-testid": "grant-apply",
      text: `Decide ${ids.length === 1 ? "it" : `all ${ids.length}`} too`,
    });
    const no = make("button", {
      type: "button", className: "btn btn-secondary", "data-testid": "grant-apply-dismiss", text: "Not now",
    });
    no.addEventListener("click", () => { box.hidden = true; box.replaceChildren(); });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      no.disabled = true;
      try {
        const data = await api("POST", `/v1/grants/${encodeURIComponent(grantId)}/apply`, { ids });
        const results = asList(data, "results");
        const done = results.filter((one) => one && typeof one.status === "string").length;
        const failed = results.filter((one) => one && one.error && typeof one.error.message === "string");
        result.textContent = `Decided ${done} of ${ids.length}.`
          + failed.map((one) => ` ${one.error.message}`).join("");
      } catch (err) {
        result.textContent = `Could not decide them: ${err.message}`;
      }
      no.disabled = false;
      no.textContent = "Close";
      await refreshSafely();
    });
    box.replaceChildren(
      make("p", { "data-testid": "grant-covers-pending",
        text: `This grant also covers ${count}: decide them too?` }),
      make("div", { className: "buttons" }, no, yes),
      result);
    box.hidden = false;
  }

  /** The grants' display texts, checked; null for one the page cannot show. */
  function grantTexts(grant) {
    const d = grant && grant.display;
    const str = (value) => typeof value === "string";
    if (!d || !str(grant.id) || !str(grant.status) || !str(d.tool) || !str(d.granted_by)
      || !Array.isArray(d.scope) || !d.scope.every(str)) return null;
    return d;
  }

  function grantUsesText(grant) {
    if (!Number.isInteger(grant.uses_left)) return "No limit on uses";
    const of = Number.isInteger(grant.uses) ? ` of ${grant.uses}` : "";
    return `${grant.uses_left}${of} ${grant.uses === 1 ? "use" : "uses"} left`;
  }

  function buildGrantCard(grant, texts) {
    const error = make("p", { className: "card-error", role: "alert", "data-testid": "grant-error", hidden: true });
    const noteId = freshId("grant-note");
    const note = make("input", {
      id: noteId, type: "text", maxlength: 2000, className: "grant-input", "data-testid": "grant-revoke-note",
      placeholder: "Why you revoke it (optional)", autocomplete: "off",
    });
    const revoke = make("button", { type: "button", className: "btn btn-deny", "data-testid": "grant-revoke", text: "Revoke" });
    const left = make("span", {
      className: "countdown", role: "timer", "data-testid": "grant-time-left",
      "data-expires-at": grant.expires_at, "aria-label": "Time left on this grant",
    });
    const id = encodeURIComponent(grant.id);
    async function act(button, path, body) {
      button.disabled = true;
      error.hidden = true;
      try {
        await api("POST", path, body);
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        button.disabled = false;
        return;
      }
      grantsSignature = null;
      await refreshGrants();
    }
    revoke.addEventListener("click", () => act(revoke, `/v1/grants/${id}/revoke`, { note: note.value.trim() || null }));
    let approve = null;
    if (grant.status === "pending") {
      approve = make("button", { type: "button", className: "btn btn-approve", "data-testid": "grant-approve", text: "Approve this grant" });
      approve.addEventListener("click", () => act(approve, `/v1/grants/${id}/approve`, {}));
    }
    const verb = grant.decision === "denied" ? "Standing denial" : "Standing approval";
    const card = make("li", {
      className: "card grant-card", "data-testid": `grant-${grant.id}`, "data-grant-id": grant.id,
      "data-status": grant.status,
    },
    make("div", { className: "card-head" },
      make("h3", { className: "tool", "data-testid": "grant-tool", text: texts.tool }), left, badge(grant.status)),
    make("p", { className: "meta", "data-testid": "grant-by" },
      `${verb} given by ${texts.granted_by} at ${formatTime(grant.granted_at)} · id `,
      make("span", { className: "mono", text: grant.id })),
    make("ul", { className: "grant-words", "data-testid": "grant-scope" },
      ...texts.scope.map((line) => make("li", { text: line }))),
    make("p", { className: "meta", "data-testid": "grant-uses-left", text: grantUsesText(grant) }),
    typeof texts.note === "string" && texts.note
      ? make("p", { className: "outcome-note", "data-testid": "grant-note", text: texts.note }) : null,
    typeof texts.approvals === "string"
      ? make("p", { className: "approvals", "data-testid": "grant-approvals", text: texts.approvals }) : null,
    make("div", { className: "buttons grant-buttons" },
      make("label", { for: noteId, className: "visually-hidden", text: "Note for revoking" }), note, revoke, approve),
    error);
    updateGrantTime(left);
    return card;
  }

  function updateGrantTime(node) {
    const expires = Date.parse(node.dataset.expiresAt);
    const ms = Number.isNaN(expires) ? 0 : expires - now();
    node.textContent = ms > 0 ? formatLeft(ms) : "expired";
    node.dataset.urgent = String(ms < URGENT_MS);
    if (ms <= 0 && node.dataset.ended !== "true") {
      node.dataset.ended = "true";
      grantsSignature = null;
      scheduleRefresh(1200);
    }
  }

  /** Reload the "Standing grants" list (live and pending); rebuilt only when it changed. */
  async function refreshGrants() {
    const count = el("grants-count");
    let grants;
    let total = 0;
    try {
      const data = await api("GET", "/review/grants");
      grants = asList(data, "grants");
      total = data && Number.isInteger(data.total) ? data.total : grants.length;
    } catch (err) {
      el("grants-error").textContent = `Could not load standing grants: ${err.message}`;
      el("grants-error").hidden = false;
      return;
    }
    el("grants-error").hidden = true;
    const shownGrants = grants.map((grant) => [grant, grantTexts(grant)]).filter(([, texts]) => texts !== null);
    const signature = shownGrants.map(([g]) => `${g.id}:${g.status}:${g.uses_left}:${g.granted_by}`).join("|");
    count.textContent = String(Math.max(total, shownGrants.length));
    el("grants-empty").hidden = shownGrants.length > 0;
    const more = el("grants-more");
    more.textContent = total > grants.length
      ? `The newest ${grants.length} of ${total} are shown; GET /v1/grants lists them all.`
      : "";
    more.hidden = !more.textContent;
    if (signature === grantsSignature) return;
    grantsSignature = signature;
    grantsList.replaceChildren(...shownGrants.map(([grant, texts]) => buildGrantCard(grant, texts)));
  }

  function tickGrants() {
    for (const node of grantsList.querySelectorAll("[data-expires-at]")) updateGrantTime(node);
  }

  /** "grant grant_1a2b of alice" / "rule small refunds": the server's words for what decided it. */
  function decidedThroughText(request) {
    const d = request.display;
    return d && typeof d.decided_through === "string" ? d.decided_through : "";
  }

  // ---------------------------------------------------------------- refresh loop

  /**
   * Requests with these statuses, newest first, in the provider's order: all of
   * them when wanted is null, else at least that many if there are. Follows
   * next_before page by page, so nothing is left out because the list is long.
   */
  async function listRequests(statuses, wanted) {
    const requests = [];
    let before = null;
    for (;;) {
      const limit = wanted === null ? MAX_PAGE : Math.min(MAX_PAGE, wanted - requests.length);
      let path = `/v1/requests?status=${statuses}&limit=${limit}`;
      if (before !== null) path += `&before=${encodeURIComponent(before)}`;
      const data = await api("GET", path);
      const page = asList(data, "requests")
        .filter((r) => r && typeof r === "object" && typeof r.id === "string");
      requests.push(...page);
      const next = data && typeof data.next_before === "string" ? data.next_before : null;
      const more = next !== null && page.length > 0;
      if (!more || (wanted !== null && requests.length >= wanted)) return { requests, more };
      before = next;
    }
  }

  async function refresh() {
    // Pending first: what waits for a decision shows even if the closed list fails.
    const pending = await listRequests(PENDING, null);
    renderPending(pending.requests.filter((r) => r.status === "pending"));
    const closed = await listRequests(CLOSED, doneWanted);
    renderDone(closed.requests.filter((r) => r.status !== "pending"), closed.more);
    highlightWanted();
    await refreshGrants();
  }

  function highlightWanted() {
    if (!WANTED_REQUEST) return;
    for (const card of document.querySelectorAll("[data-request-id]")) {
      const match = card.dataset.requestId === WANTED_REQUEST;
      if (!match) {
        delete card.dataset.highlight;
        continue;
      }
      card.dataset.highlight = "true";
      if (!wantedShown) {
        wantedShown = true;
        const details = card.querySelector("details");
        if (details) details.open = true;
        card.scrollIntoView({ block: "center" });
      }
    }
  }

  function showOlder() {
    doneWanted += DONE_PAGE;
    refreshSafely();
  }

  async function refreshSafely() {
    try {
      await refresh();
      clearError();
      return true;
    } catch (err) {
      showError(`Could not load requests: ${err.message}`);
      return false;
    }
  }

  function scheduleRefresh(delayMs) {
    if (refreshQueued) return;
    refreshQueued = setTimeout(() => {
      refreshQueued = null;
      refreshSafely();
    }, delayMs);
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function watch() {
    // GET /v1/events answers {"seq": N} at once; with ?after=N it answers as soon
    // as anything changed after N (or when the wait ends). Each new N means: reload.
    let seq = null;
    let failures = 0;
    let notice = null;
    for (;;) {
      try {
        const path = seq === null ? "/v1/events" : `/v1/events?after=${seq}&wait=${EVENTS_WAIT}`;
        const data = await api("GET", path);
        if (data && typeof data.notice === "string" && data.notice !== notice) {
          notice = data.notice;
          showNotice(notice);
        }
        const next = data && Number.isInteger(data.seq) ? data.seq : (seq ?? 0);
        if (seq === null || next !== seq) {
          seq = next;
          if (!(await refreshSafely())) throw new ApiError(0, "refresh", "Could not load requests.");
        }
        failures = 0;
        setLive("live");
      } catch (err) {
        if (notice !== null && err.type === "network") {
          // The provider said it was finishing (the demo), and now it has: not an outage.
          setLive("finished");
          return;
        }
        failures += 1;
        seq = null; // start again from "now": a restarted provider may count from scratch
        setLive("offline");
        if (err.type !== "refresh") showError(err.message);
        if (err.status === 401 || err.status === 403) return; // signing in again is needed
        await sleep(Math.min(1000 * 2 ** Math.min(failures, 4), 15000));
      }
    }
  }

  function tick() {
    for (const entry of pendingCards.values()) updateCountdown(entry);
    tickGrants();
  }

  function start() {
    el("done-more").addEventListener("click", showOlder);
    setLive("connecting");
    watch();
    setInterval(tick, 1000);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
