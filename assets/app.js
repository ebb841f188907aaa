// Click a highlighted token of the latest answer (the chat's, or the step-through's): its step
// slider jumps to the token's step, so the draft tree and the panels show that step.
const TOKEN_SLIDERS = [
  ["#chat .msg.bot:last-child .tok[data-step]", "#step-slider"],
  ["#teach-answer .tok[data-step]", "#teach-step"],
];
document.addEventListener("click", (e) => {
  const hit = e.target.closest && TOKEN_SLIDERS.find(([tokens]) => e.target.closest(tokens));
  if (!hit) return;
  const tok = e.target.closest(hit[0]);
  const box = document.querySelector(`${hit[1]} input[type=number]`);
  if (!box || box.disabled) return;
  box.value = String(Number(tok.dataset.step) + 1);
  box.dispatchEvent(new Event("input", { bubbles: true }));
  box.dispatchEvent(new Event("change", { bubbles: true }));
  box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  box.blur();
});

// Gradio adds this script to the page after the window's load event: run at once if it is past.
function whenLoaded(fn) {
  if (document.readyState === "complete") fn();
  else window.addEventListener("load", fn);
}

// On a phone the guided examples and the settings start folded: one tap opens them (the settings
// come after the message box there, assets/app.css).
whenLoaded(() => {
  if (!window.matchMedia("(max-width: 640px)").matches) return;
  for (const id of ["guided", "settings-acc"]) {
    let tries = 0;
    const fold = setInterval(() => {
      const label = document.querySelector(`#${id} > button.label-wrap, #${id} button.label-wrap`);
      if (label || ++tries > 50) clearInterval(fold);
      if (label && label.classList.contains("open")) label.click();
    }, 100);
  }
});

// Deep links: #chat, #step-through, #how-rest, or the id of anything in a view (#compare-box,
// #why-c, #glossary) opens the view (tab) that holds it, scrolls to it and unfolds it. A view's
// content is drawn when it is first opened, so app.py writes which view holds each id into
// window.REST_VIEWS. Opening a view puts its name in the address, to copy or reload.
const views = () => window.REST_VIEWS || {};
let linked = false; // the address's link was followed: from now on the open view goes into it
let going = null; // the link being followed: one at a time, and a user's own tab click ends it

function stopGoing() {
  clearInterval(going);
  going = null;
  linked = true;
}

function openLink() {
  const id = decodeURIComponent(location.hash.slice(1));
  const view = views()[id];
  clearInterval(going);
  if (!view) {
    linked = true;
    return;
  }
  let tries = 0;
  going = setInterval(() => {
    const tab = document.querySelector(`#views [role=tab][data-tab-id="${view}"]`);
    if (tab && tab.getAttribute("aria-selected") !== "true") tab.click();
    const target = id === view ? null : document.getElementById(id);
    const shown = tab && tab.getAttribute("aria-selected") === "true" && (!target ? id === view : target.offsetParent);
    if (!shown && ++tries < 300) return;
    stopGoing(); // a newer link or a user's tab click cleared this interval before it got here
    if (!shown) return;
    (target || document.getElementById("views")).scrollIntoView({ block: "start" });
    if (target) unfold(target);
  }, 100);
}

// A tab the user clicks (a trusted event, unlike the link's own clicks) wins over a link still
// waiting for its view to draw: the link would otherwise click its own tab back a moment later.
document.addEventListener(
  "click",
  (e) => {
    const tab = e.isTrusted && e.target.closest && e.target.closest("#views [role=tab]");
    if (!tab || !going) return;
    stopGoing();
    if (views()[decodeURIComponent(location.hash.slice(1))] !== tab.dataset.tabId)
      history.replaceState(null, "", `#${tab.dataset.tabId}`);
  },
  true,
);

// A folded section (an accordion) the link points at opens; for two seconds it is opened again if
// the view's first render folds it back (it sets each block's initial state as it draws them).
function unfold(target) {
  let ticks = 0;
  const keep = setInterval(() => {
    const label = target.querySelector(":scope > button.label-wrap");
    if (label && !label.classList.contains("open")) label.click();
    if (++ticks >= 20) clearInterval(keep);
  }, 100);
}

whenLoaded(openLink);
window.addEventListener("hashchange", openLink);

new MutationObserver((changes) => {
  if (!linked) return;
  for (const change of changes) {
    const tab = change.target;
    if (!tab.matches("#views [role=tab]") || tab.getAttribute("aria-selected") !== "true") continue;
    const here = decodeURIComponent(location.hash.slice(1));
    if (views()[here] !== tab.dataset.tabId) history.replaceState(null, "", `#${tab.dataset.tabId}`);
  }
}).observe(document.documentElement, { subtree: true, attributes: true, attributeFilter: ["aria-selected"] });

// A control's status (why Send or Compare did nothing, a load in progress, an upload's progress)
// appears under the control: when it appears below (or above) the window, as a longer colour key
// or an open settings panel can push it, the page scrolls just enough to show it, once per status.
const STATUS_BOXES = ["#chat-status", "#compare-status", "#teach-status", "#corpus-status"];
const shownStatuses = new WeakSet();
function showStatuses() {
  for (const box of STATUS_BOXES) {
    const status = document.querySelector(`${box} .status`);
    if (!status || shownStatuses.has(status)) continue;
    const r = status.getBoundingClientRect();
    if (!r.height) continue; // not laid out yet: looked at again after the next change
    shownStatuses.add(status);
    // By whole pixels with a small margin: scrollIntoView's "nearest" can leave a box that starts
    // on a fractional pixel a fraction of a pixel below the window's edge.
    const margin = 8;
    if (r.bottom > window.innerHeight) window.scrollBy(0, Math.ceil(r.bottom - window.innerHeight + margin));
    else if (r.top < 0) window.scrollBy(0, Math.floor(r.top - margin));
  }
}
// After the browser has laid the change out (a status just inserted can still measure 0 px).
new MutationObserver(() => requestAnimationFrame(showStatuses)).observe(document.documentElement, {
  subtree: true,
  childList: true,
});

// The open view's name on <body data-view>: How REST works draws the method's diagram large, so
// the header's small copy of it (and its three captions) folds away while that view is open.
function markView() {
  const open = document.querySelector("#views [role=tab][aria-selected=true]");
  if (open && document.body.dataset.view !== open.dataset.tabId) document.body.dataset.view = open.dataset.tabId;
}
whenLoaded(markView);
new MutationObserver(markView).observe(document.documentElement, {
  subtree: true,
  attributes: true,
  attributeFilter: ["aria-selected"],
});
