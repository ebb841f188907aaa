"""The page's words: the header, the example prompts, the step-through's notes, why one forward
over many tokens pays, and the glossary. Plain strings (Markdown or HTML) that app.py and
teach_tab.py put on the page."""


def header_html(model: str, device: str, small_model: bool = False) -> str:
    """The page's first screen: the title; what runs where and what speed to expect there; the
    method as three steps (look up, verify, keep) with a link to How REST works. `model` is the
    model's name, `device` where it runs in words ("this machine's CPU (2 cores)"); a `small_model`
    gets the warning that its own mistakes are plain decoding's too."""
    cpu = "CPU" in device
    gpu = (
        "on a GPU a step costs about the same for 1 token or dozens, so the speedup approaches M, the tokens per step."
    )
    expect = (
        "On a CPU, verifying several tokens costs more than verifying one, so speedups here are small (the auto "
        f"budget drafts only where it expects to gain); {gpu}"
        if cpu
        else gpu[0].upper() + gpu[1:]
    )
    # A phone gets the same in fewer words (the reasons are in How REST works).
    short = "Speedups are small on a CPU; on a GPU they approach M, the tokens per step." if cpu else expect
    caveat = (
        f"{model} is small and makes mistakes of its own (it may drop a word): plain decoding makes the same ones."
        if small_model
        else f"REST writes exactly what plain decoding writes with {model}, mistakes included."
    )
    return f"""
<div id="header">
<h1>REST: retrieval-based speculative decoding, live</h1>
<p class="machine">Running <b>{model}</b> on <b>{device}</b>. <span class="wide-only">{expect}</span><span
class="phone-only">{short}</span></p>
<ol class="steps">
<li><b>1. Look up:</b> the last few tokens are found in a <b>datastore</b> and in the <b>conversation</b>; what
followed them there are <b>drafts</b>.</li>
<li><b>2. Verify:</b> the model checks all drafts in <b>one</b> forward pass.</li>
<li><b>3. Keep:</b> the drafts the model agrees with are accepted, plus one token of its own: the text is exactly
what plain decoding writes.</li>
</ol>
<p class="more"><a href="#how-rest">How REST works →</a> <span class="caveat">{caveat}</span></p>
</div>
"""


EXAMPLES = [
    ["Write a Python function that checks whether a string is a palindrome, with a docstring and two tests."],
    ["Write a Python class Stack with push, pop, peek and is_empty methods."],
    ["What are three tips for staying productive when working from home?"],
    ["Explain the difference between a list and a tuple in Python."],
]

STEP_NOTE = (
    "Step mode runs one forward pass per click. It verifies a fixed c, the most draft tokens verified per step: "
    "set it beside the message, up to 64, so the tree is worth looking at. The datastores and the other settings "
    "are those of the Chat view's Settings panel; each step's header lists the ones it used. Timings here are not "
    "speed figures: the page renders between steps and c is fixed. Use Send and Compare in Chat for speed."
)

GLOSSARY = """
| term | meaning |
|---|---|
| **draft** | tokens guessed from a source: what followed the last few tokens where they occur in a datastore or earlier in the conversation. The model checks them; it never has to take them |
| **datastore** | a corpus (chat answers, Python code, or one you upload) stored as token ids with a suffix array, so any token sequence is found in it by binary search. The datastore named *chat* is a corpus of ShareGPT conversations, not this conversation |
| **suffix array** | every position of the corpus, sorted by the text that starts there; all occurrences of a token sequence sit next to each other in it, so two binary searches find them all |
| **conversation** | the draft source that is this conversation itself (the prompt and the answer so far), searched the same way: an answer that repeats earlier text drafts itself (the engine and its settings call it *context*) |
| **several sources** | a token that two or more sources drafted, coloured violet; hovering it names them, e.g. several sources (chat + code) |
| **n_max, n_min** | the longest and shortest suffix of the conversation (its last n tokens) looked up; the longest one that occurs wins |
| **m** | how many tokens after each occurrence are taken as a continuation |
| **K** | at most K occurrences are used; above K a fair sample of K is taken |
| **trie** | a prefix tree: the continuations merged so that continuations sharing a beginning share a branch; one node per token, its path from the root is the draft it stands for |
| **weight** | how likely a node's path is: every source that found continuations (each datastore at the *datastore weight*, the conversation at the *conversation weight*: 1 each by default) splits its weight evenly over its own continuations, and a node adds up the shares of every continuation through it, from every source. The Retrieve panel shows a first-level node's weight over the whole first level's, the sum of those sources' weights: with code, chat and the conversation at 1 each, a token that starts all of one source's continuations and none of the others' gets 1/3 |
| **heaviest** | the nodes of largest weight; the c heaviest always form a connected subtree (a child never outweighs its parent), and only they are verified |
| **c** | c, the most draft tokens verified per step: the trie's c heaviest nodes at most. A large c checks more guesses in the same forward pass: worth it on a GPU, where verifying 64 tokens costs about as much as 1. On a CPU every extra token costs time, so the auto budget (the CPU default) verifies fewer than c where more would not pay, often none (see *Why this c?*) |
| **auto budget** | picks per step how many drafts to verify, from 0 up to c: it measures on this device how long a forward over 1, 2, 4, … tokens takes (the *measured cost*) and keeps the count whose expected accepted tokens per millisecond is best. The fixed budget verifies c every step |
| **accepted** | a draft token the model agrees with: it equals the token the model writes there. A step keeps its accepted drafts, in order, up to the first disagreement |
| **model's own token** | the token the model writes itself at the end of a step, after the accepted drafts (marked by a dotted underline). A step the length limit cuts ends without one |
| **tree attention mask** | lets every draft node see the cached context, its ancestors and itself only, so one forward pass checks every branch at once |
| **KV cache** | the keys and values the model computed for every earlier token, kept so that a step computes only its new tokens; after a step the rejected drafts' entries are dropped |
| **root** | the last emitted token: it starts each step's forward pass (its KV is not cached yet); row 0 of the step |
| **rows** | the tokens of one verify forward, one row each: row 0 is the root, row i the i-th drafted node in the trie's breadth-first order (depth 1 first; not heaviest first); in the mask, a row is what that token may attend to |
| **position id** | the position in the text the model is told a token has: a drafted node sits at its root's position plus its depth, so siblings share one position, as they would in their own branch |
| **lazy logits** | the output head (the largest matrix of a small model) scores only the rows the acceptance walk reaches, not every drafted row (Step through alone scores every row too, after the step's clock, to show the model's token at rows never reached) |
| **M** | mean tokens written per forward pass (plain decoding: 1). The speedup is M divided by how much longer a REST forward takes than a one-token one, so it is always below M (a speedup measured above M means the machine's load changed between the two runs) |
| **prefill** | the one forward over the whole prompt before the first new token (the KV cache is filled); left out of every tokens/s on this page |
| **prompt lookup** | transformers' own draft method, compared in *Speed*: it drafts from the prompt and answer only: the last few tokens (transformers' default: up to 2) are looked up earlier in the text and the k = 3 tokens that followed them are drafted as one chain; no datastore, no trie |
| **temperature, top-p, top-k** | sampling settings: temperature 0 is greedy (always the likeliest token); above 0 the model draws from its distribution, flattened by a higher temperature, cut to the k likeliest tokens (top-k) and to the likeliest ones whose chances add up to p (top-p). REST accepts a draft token only when it equals that draw |
| **lossless** | the output is exactly what plain decoding writes: a draft token is accepted only where it equals the model's own choice (or, sampling, the model's own draw). A small model's own mistakes are plain decoding's too |
"""

ONE_FORWARD = """
#### Why checking many tokens in one forward beats one forward per token

- Plain decoding runs the whole model once per token.
- REST asks the model about the root and up to c draft tokens in **one** forward pass.
- Every accepted draft token is a forward pass saved, and the model's own next token comes free at the end: a step
  writes M tokens, 1 + the accepted drafts.
- On a GPU, a forward over dozens of tokens costs about as much as one over a single token: its time goes into
  reading the weights, not into arithmetic. So the speedup approaches M.
- On a CPU, every extra token adds arithmetic. The speedup is M divided by how much longer the bigger forward takes,
  so the auto budget drafts only where it expects to gain.
- Either way the text is the same: a draft token is accepted only where the model would have written it.

*Speed* in Chat measures both; *Why this c?* in Step through shows the cost against c.
"""

WHY_C_NOTE = (
    "Measures the forward pass on this device for 1, 2, 4, … 65 tokens (a few seconds the first time): the same "
    "*measured cost* the auto budget uses. Combined with the acceptance of the answer it names, it predicts the speedup for every c "
    "(a prediction: Compare times whole runs on the wall clock)."
)
