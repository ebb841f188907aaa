// Click a highlighted token of the latest answer: the step slider jumps to its step, so the
// draft tree and the inspector show that step.
document.addEventListener("click", (e) => {
  const tok = e.target.closest && e.target.closest("#chat .msg.bot:last-child .tok[data-step]");
  if (!tok) return;
  const box = document.querySelector("#step-slider input[type=number]");
  if (!box || box.disabled) return;
  box.value = String(Number(tok.dataset.step) + 1);
  box.dispatchEvent(new Event("input", { bubbles: true }));
  box.dispatchEvent(new Event("change", { bubbles: true }));
  box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  box.blur();
});

// On a phone the settings sit above the chat (app.css) and start folded: one tap opens them.
window.addEventListener("load", () => {
  if (!window.matchMedia("(max-width: 640px)").matches) return;
  let tries = 0;
  const fold = setInterval(() => {
    const label = document.querySelector("#settings-acc > button.label-wrap, #settings-acc button.label-wrap");
    if (label || ++tries > 50) clearInterval(fold);
    if (label && label.classList.contains("open")) label.click();
  }, 100);
});
