"""The query vectors one recall process embedded lately, by text, so the same text is not embedded twice.

The same query text is embedded again and again within seconds: lane 2's search (its extractive stand-in, and
often the sub-agent's first `memory_search`) asks with the very text lane 1 has just embedded, a runtime that
retries a recall sends the same message again, and one message may be recalled for several agents of a tenant.
A local embedding costs a few milliseconds of a core (more under load, when it also waits its turn), a remote one
a round trip. A vector depends only on the text and the model, which is fixed for the process, so a kept one is
the vector a new embedding would give: the same results. Bounded (least recently used first out); a failed
embedding is not kept.
"""

from collections import OrderedDict

import numpy as np

from cairn.memindex import Embedder

VECTORS_KEPT = 512  # about 1 MB of 512-dimension vectors, and texts of at most 2,000 characters


class QueryVectors:
    def __init__(self, embedder: Embedder, kept: int = VECTORS_KEPT) -> None:
        self._embedder, self._kept = embedder, kept
        self._known: OrderedDict[str, np.ndarray] = OrderedDict()

    async def vector(self, text: str) -> np.ndarray:
        """The text's unit vector (raises what the embedder raises)."""
        known = self._known.get(text)
        if known is not None:
            self._known.move_to_end(text)
            return known
        vector: np.ndarray = (await self._embedder.embed([text]))[0]
        self._known[text] = vector
        while len(self._known) > self._kept:
            self._known.popitem(last=False)
        return vector
