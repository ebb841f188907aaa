"""REST as a speculative proposer inside vLLM: its settings, the proposer, the server launcher and the bench worker."""
