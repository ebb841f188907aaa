"""Which default datastores fit a message: a code question drafts from `code` and `chat` together
(on code prompts both beat either alone: docs/results.md, "Two stores at once"), anything else
from `chat` alone (there the code store's continuations only take draft slots). A visitor who
picked stores keeps their choice; this only replaces the page's default. No Gradio here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rest_core.ui.style import esc, status_html

CODE_STORE, CHAT_STORE = "code", "chat"

# Signs of code in a message: code itself (a fence, a definition, an import, a call with a
# body, a statement ending in ';'), or a question about programming by name.
_CODE = re.compile(
    r"```|^\s*(def|class|import|from|for|while|if|return|#include|function|const|let|var|public|SELECT)\b"
    r"|\b(def|lambda)\s+\w*\(|\w+\([^)]*\)\s*[:{]|;\s*$"
    r"|\b(python|javascript|typescript|java|c\+\+|rust|golang|sql|regex|bash|script|function|method|class|"
    r"compile|compiler|exception|traceback|stack trace|bug|debug|algorithm|code|coding|program|programming|"
    r"api|json|numpy|pandas|variable|loop|recursion)\b",
    re.IGNORECASE | re.MULTILINE,
)


def looks_like_code(message: str) -> bool:
    """Whether a message is code, or asks about code."""
    return bool(_CODE.search(message or ""))


def default_stores(message: str, available: Sequence[str]) -> list[str]:
    """The stores a message drafts from by default, among `available` (the server's public
    stores): code and chat for a code question, chat for anything else; when neither default
    store exists, the first available one (none: [])."""
    wanted = [CODE_STORE, CHAT_STORE] if looks_like_code(message) else [CHAT_STORE]
    picked = [s for s in wanted if s in available]
    return picked or list(available[:1])


@dataclass(frozen=True)
class StorePick:
    """The stores a message drafts from on a page where the visitor has not chosen any, and the
    sentence saying which and why (`text`; `note`: Chat's status line of it, HTML)."""

    stores: list[str]
    text: str

    @property
    def note(self) -> str:
        return status_html(esc(self.text), elem_id="store-pick")


def pick_for(message: str, available: Sequence[str]) -> StorePick:
    """default_stores for `message`, with the page's word on it."""
    stores = default_stores(message, available)
    used = " + ".join(stores) if stores else "the conversation alone"
    if stores == [CODE_STORE, CHAT_STORE]:
        why = "the message looks like code, where the code and chat stores together draft more than either alone"
    elif stores == [CHAT_STORE]:
        why = "the message reads as conversation, which the chat store knows best"
    elif stores:
        why = "neither the code nor the chat store is built here, so the first datastore this server has"
    else:
        why = "no datastore is built on this server"
    text = f"Drafting from {used}: {why}. Choose datastores in Settings to keep your own choice."
    return StorePick(stores=stores, text=text)
