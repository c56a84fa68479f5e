"""Prompt lookup: guess what a model writes next from what it has read and written.

A ReAct model copies much of its text: search arguments are titles from the question or a
`Similar:` list, lookups repeat words of the page, answers are spans of observations. When the
last few tokens occurred before, what followed them then is a good guess of what follows now.
"""

NGRAMS = (3, 2)  # the lengths of the token runs matched, longest first


class Lookup:
    """The tokens of a prompt and its completion so far, with where each run of tokens last occurred."""

    def __init__(self, prompt: list[int]) -> None:
        self.tokens: list[int] = []
        self._prompt = len(prompt)
        self._after: dict[tuple[int, ...], int] = {}  # a run of tokens -> where the token after it is
        self._add(prompt)

    def _add(self, tokens: list[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            end = len(self.tokens)
            for n in NGRAMS:
                if end > n:  # the run that ends before the newest token, which is what followed it
                    self._after[tuple(self.tokens[end - n - 1 : end - 1])] = end - 1

    def extend(self, completion: list[int]) -> None:
        """Take in the tokens of `completion` (the text generated so far) not taken in yet."""
        self._add(completion[len(self.tokens) - self._prompt :])

    def propose(self, k: int) -> list[int]:
        """Up to `k` tokens that followed the latest earlier occurrence of the last 3 tokens (else 2), or none."""
        for n in NGRAMS:
            if len(self.tokens) > n:
                at = self._after.get(tuple(self.tokens[-n:]))
                if at is not None:
                    return self.tokens[at : at + k]
        return []
