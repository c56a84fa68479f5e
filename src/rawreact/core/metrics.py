"""Answer scoring as in the official HotpotQA evaluation: normalisation, exact match, F1.

Two rules sit on top of the official code, because its normalisation maps some texts to nothing
and then scores nothing against nothing as a match: a prediction that is no answer (`is_answer`)
never matches, and a gold answer that is no answer gives no score at all (`scores` is None).
"""

import re
import string
import unicodedata
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and the articles a/an/the, fold white space."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def is_answer(text: str | None) -> bool:
    """Whether `text` says anything: a letter or a digit (in any script) that survives the official
    normalisation. A zero-width space, `。`, `"the"` or `...` is no answer."""
    if text is None:
        return False
    kept = normalize_answer(unicodedata.normalize("NFKC", text))
    return any(unicodedata.category(char)[0] in "LN" for char in kept)


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised answers are equal and the prediction is an answer, else 0.0."""
    return float(is_answer(prediction) and normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised answers; yes/no/noanswer must match exactly."""
    if not is_answer(prediction):
        return 0.0
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer")) and pred != ref:
        return 0.0
    common = Counter(pred.split()) & Counter(ref.split())
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred.split()), same / len(ref.split())
    return 2 * precision * recall / (precision + recall)


def scores(prediction: str, gold: str) -> tuple[float, float] | tuple[None, None]:
    """(EM, F1) of `prediction` against `gold`, or (None, None) when the gold is no answer: no gold, no score."""
    if not is_answer(gold):
        return None, None
    return exact_match(prediction, gold), f1_score(prediction, gold)
