"""rest_core: retrieval-based speculative decoding (REST) as a small, reusable library."""

__version__ = "0.1.0"
