"""SPEC §6.1 GPTDatasetV1 and create_dataloader_v1 against tiktoken's GPT-2
encoding built offline from the fixture vocabulary (the worker gets the same
encoding under ``tiktoken.get_encoding("gpt2")``). The MUST texts hold no
special token: the book's first printing encodes with ``tokenizer.encode(txt)``,
which refuses ``<|endoftext|>``, a later one allows it; a text holding it is
STRICT."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmspec.conformance.asserts import assert_equal
from lmspec.conformance.gpt2 import oracles as o
from lmspec.conformance.gpt2 import strategies as sg
from lmspec.conformance.gpt2.checks import assert_equal_explained
from lmspec.conformance.gpt2.known_bugs import KNOWN_BUGS
from lmspec.conformance.hints import confirmed, likely_causes, other

TEXT = (
    "Once upon a time, there was a little robot named Bo. Bo liked to count the stars. "
    'One day, a cat said: "Why do you count them?" Bo smiled. "Because each one is new," he said. '
    "They counted 1, 2, 3 stars together until the sun came up."
)
#: The same story as two documents joined by GPT-2's end-of-text token (STRICT).
TEXT_EOT = TEXT.replace("the stars. ", "the stars.<|endoftext|>", 1)


@pytest.fixture(scope="module")
def encoding(fixtures_dir):
    return o.gpt2_encoding(fixtures_dir / "gpt2_vocab.json")


def _ids(encoding, text=TEXT):
    return encoding.encode(text, allowed_special={o.END_OF_TEXT})


#: Its second input (conformance/hints.py): the token between two other sentences.
TEXT_EOT_SECOND = TEXT.replace("Bo smiled. ", "Bo smiled.<|endoftext|>", 1)

assert o.END_OF_TEXT not in TEXT and o.END_OF_TEXT in TEXT_EOT and o.END_OF_TEXT in TEXT_EOT_SECOND
NOT_ALLOWED = "tokenizer.encode(txt) without allowed_special: tiktoken refuses <|endoftext|>"


def _refused(encoding, text: str, raised: BaseException) -> list[str]:
    """[NOT_ALLOWED] when ``raised`` is what ``encoding.encode(text)`` raises
    without allowed_special (its replay): tiktoken's refusal, its first line."""
    try:
        encoding.encode(text)
    except ValueError as refusal:
        return [NOT_ALLOWED] if str(refusal).splitlines()[0] in str(raised) else []
    return []


def _refused_again(run, encoding) -> list[str]:
    """The replay's cause where the implementation raises on the second text as the replay does."""
    try:
        run(txt=TEXT_EOT_SECOND, max_length=4, stride=4)
    except Exception as exc:
        return _refused(encoding, TEXT_EOT_SECOND, exc)
    return []


#: Second inputs (conformance/hints.py): (max_length, stride) with stride 1
#: (the book's first example), where one window short, one window too many
#: and unshifted targets all show.
SECOND_WINDOWS = ((4, 1), (6, 1))


def _observed(run, ids, case):
    """The dataset's (input windows, target windows) and the known bugs' replays there."""
    max_length, stride = case
    got = run(txt=TEXT, max_length=max_length, stride=stride)
    return (got["inputs"], got["targets"]), KNOWN_BUGS.thunks("gpt2.dataset", ids, max_length, stride)


@sg.budget(12)
@pytest.mark.spec("gpt2.dataset")
@given(max_length=st.integers(2, 16), stride=st.integers(1, 20))
def test_dataset_windows(gpt2_dataset, encoding, max_length, stride):
    """Windows start at 0, stride, … while start + max_length < len(ids); targets are inputs shifted by one."""
    ids = _ids(encoding)
    inputs, targets = o.windows(ids, max_length, stride)
    got, bugs = _observed(gpt2_dataset, ids, (max_length, stride))
    second = other((max_length, stride), *SECOND_WINDOWS)

    def again():
        return _observed(gpt2_dataset, ids, second)

    rule = f"{len(inputs)} windows of {max_length} ids every {stride} ids"
    explained = {"hints": bugs, "again": again, "observed": got}
    assert_equal_explained(len(got[0]), len(inputs), rule=rule, context=f"{len(ids)} ids", **explained)
    assert_equal(got[0], inputs, rule="input windows ids[s : s+max_length]")
    assert_equal_explained(got[1], targets, rule="target windows ids[s+1 : s+max_length+1]", **explained)


@pytest.mark.spec("gpt2.dataset")
def test_dataset_encodes_the_text_with_gpt2(gpt2_dataset, encoding):
    """The windows hold the text's GPT-2 token ids, in order."""
    got = gpt2_dataset(txt=TEXT, max_length=4, stride=4)
    flat = [t for w in got["inputs"] for t in w]
    assert_equal(flat, _ids(encoding)[: len(flat)], rule="GPT-2 token ids of the text")


@pytest.mark.spec("gpt2.dataset")
@pytest.mark.strict
def test_dataset_encodes_end_of_text(gpt2_dataset, encoding):
    """STRICT: a text holding ``<|endoftext|>`` is encoded with it allowed, as
    its one id 50256 (the book's later printing passes ``allowed_special``;
    its first printing refuses such a text)."""
    try:
        got = gpt2_dataset(txt=TEXT_EOT, max_length=4, stride=4)
    except Exception as exc:
        causes = confirmed(_refused(encoding, TEXT_EOT, exc), lambda: _refused_again(gpt2_dataset, encoding))
        raise AssertionError(
            f"a text holding <|endoftext|> raised {type(exc).__name__}{likely_causes(causes)}\n"
            "  tiktoken refuses special tokens unless they are allowed: "
            'tokenizer.encode(txt, allowed_special={"<|endoftext|>"}) (the book\'s later printing)'
        ) from None
    flat = [t for w in got["inputs"] for t in w]
    assert 50256 in flat, (
        '<|endoftext|> must encode to its one id 50256: tokenizer.encode(txt, allowed_special={"<|endoftext|>"})'
    )
    assert_equal(flat, _ids(encoding, TEXT_EOT)[: len(flat)], rule="GPT-2 token ids of a text with <|endoftext|>")


@sg.budget(8)
@pytest.mark.spec("gpt2.dataset")
@given(batch=st.integers(1, 4), max_length=st.integers(2, 8), stride=st.integers(1, 8), drop_last=st.booleans())
def test_dataloader_batches_in_order(gpt2_dataloader, encoding, batch, max_length, stride, drop_last):
    """shuffle=False: consecutive windows in batches of batch_size, the last short one kept unless drop_last."""
    inputs, targets = o.windows(_ids(encoding), max_length, stride)
    stop = len(inputs) - len(inputs) % batch if drop_last else len(inputs)
    expected = [[inputs[i : i + batch], targets[i : i + batch]] for i in range(0, stop, batch)]
    got = gpt2_dataloader(
        txt=TEXT, batch_size=batch, max_length=max_length, stride=stride, shuffle=False, drop_last=drop_last
    )
    assert_equal(got, expected, rule=f"batches of {batch}, drop_last {drop_last}")


@pytest.mark.spec("gpt2.dataset")
def test_dataloader_shuffle_permutes_windows(gpt2_dataloader, encoding):
    """shuffle=True: the same windows, each once, in another order."""
    inputs, targets = o.windows(_ids(encoding), 6, 3)
    got = gpt2_dataloader(txt=TEXT, batch_size=2, max_length=6, stride=3, shuffle=True, drop_last=False, seed=4)
    pairs = sorted((tuple(x), tuple(y)) for b in got for x, y in zip(b[0], b[1], strict=True))
    assert_equal(
        pairs,
        sorted(zip(map(tuple, inputs), map(tuple, targets), strict=True)),
        rule="shuffled windows are the windows",
    )
