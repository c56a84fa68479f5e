"""Small question files in HotpotQA's official layout that the tests write themselves.

Every test of logic (loaders, runs, scoring, compare) runs on these invented rows, so the test
command passes on any machine; only the tests about real HotpotQA text need a real file.
"""

import random

_PLACES = "Orlo Dallow Veshna Tessin Calvora Marrow Ibsk Quenby Roskel Ulvik Brenna Corvid Haldane Pellam".split()
_THINGS = "Festival Observatory Bridge Museum Choir Harbour Library Mill Tower Theatre Market Lighthouse".split()
_PEOPLE = "Petra Lind|Mara Dussel|Halvard Oss|Ines Varro|Teodor Malk|Sanne Rook|Aurel Fenn|Lotte Brisk".split("|")


def rows(n: int = 100, seed: int = 0) -> list[dict]:
    """`n` invented rows of the official layout: a question, its answer, ten paragraphs, two of them supporting."""
    rng = random.Random(seed)
    made = []
    for number in range(n):
        titles: list[str] = []
        while len(titles) < 10:
            title = f"{rng.choice(_PLACES)} {rng.choice(_THINGS)}"
            if title not in titles:
                titles.append(title)
        years = {title: rng.randint(1800, 1999) for title in titles}
        keepers = {title: rng.choice(_PEOPLE) for title in titles}
        context = [
            [
                title,
                [
                    f"The {title} is a landmark of {title.split()[0]}.",
                    f" It was founded in {years[title]}.",
                    f" Its keeper is {keepers[title]}.",
                ],
            ]
            for title in titles
        ]
        first, second = rng.sample(titles[:4], 2)
        if number % 2 == 0:
            kind = "comparison"
            question = f"Were the {first} and the {second} founded in the same century (case {number})?"
            answer = "yes" if years[first] // 100 == years[second] // 100 else "no"
            facts = [[first, 1], [second, 1]]
        else:
            kind = "bridge"
            question = f"Who keeps the {first}, which stands near the {second} (case {number})?"
            answer = keepers[first]
            facts = [[second, 0], [first, 2]]
        made.append(
            {
                "_id": f"case{number:03d}",
                "question": question,
                "answer": answer,
                "type": kind,
                "level": ("easy", "medium", "hard")[number % 3],
                "supporting_facts": facts,
                "context": context,
            }
        )
    return made
