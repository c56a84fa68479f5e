"""The passage store at Wikipedia scale: build rate, size, search latency and memory.

Writes its own synthetic corpus (JSON-lines of {"title", "sentences"}) with the shape of HotpotQA's
intro paragraphs: titles of 1-5 words drawn from a Zipf vocabulary of 200,000 invented words, a
fifth of them with a disambiguation such as "(1994 film)", and a title that repeats made longer by a
word until it is unique; 2-6 sentences of 8-30 words. It then
builds stores of 100,000 and 1,000,000 pages with `rawreact index` and measures, in one run:

- build rate (pages/s) against reading and parsing the same corpus alone (the readers' cost), and
  the building process's peak memory;
- size on disk, against the corpus's JSON-lines size;
- search latency through `PassageEnv.step`, p50 and p99: a hit (an existing title in another case)
  and a miss (a title with a word dropped, a word added or a letter changed, which lists the
  `Similar:` titles), against the in-memory collection's scan over the same 100,000 titles;
- resident memory of a process that has the store open after the searches, at both sizes, and of
  one that holds the 100,000 pages in memory instead.

    python benchmarks/store.py [--pages 1000000] [--queries 2000] [--dir /tmp/rawreact-store-bench]
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rawreact.environments.env import PassageEnv
from rawreact.environments.store import PassageStore
from rawreact.models.cores import cpu_name
from rawreact.tasks.corpus import read_sources

LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
WEIGHTS = np.array(
    [
        12.7,
        9.1,
        8.2,
        7.5,
        7.0,
        6.7,
        6.3,
        6.1,
        6.0,
        4.3,
        4.0,
        2.8,
        2.8,
        2.4,
        2.4,
        2.2,
        2.0,
        2.0,
        1.9,
        1.5,
        1.0,
        0.8,
        0.2,
        0.2,
        0.1,
        0.1,
    ]
)
KINDS = ["film", "band", "album", "song", "novel", "footballer", "politician", "river", "village", "company"]


def vocabulary(rng: np.random.Generator, size: int = 200_000) -> list[str]:
    lengths = rng.integers(3, 11, size)
    letters = rng.choice(list(LETTERS), size=int(lengths.sum()), p=WEIGHTS / WEIGHTS.sum())
    words, at = [], 0
    for n in lengths:
        words.append("".join(letters[at : at + n]))
        at += n
    return words


def write_corpus(path: Path, pages: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    zipf = lambda n: np.minimum(rng.zipf(1.3, n), len(words)) - 1  # noqa: E731
    seen: set[str] = set()
    with path.open("w", encoding="utf-8") as file:
        for start in range(0, pages, 10_000):
            n = min(10_000, pages - start)
            title_lengths = rng.integers(1, 6, n)
            title_words = zipf(int(title_lengths.sum()))
            sentence_counts = rng.integers(2, 7, n)
            at = 0
            for i in range(n):
                title = " ".join(words[w].capitalize() for w in title_words[at : at + title_lengths[i]])
                at += title_lengths[i]
                if rng.random() < 0.2:
                    title += f" ({rng.integers(1900, 2020)} {KINDS[rng.integers(len(KINDS))]})"
                while title.lower() in seen:  # titles are unique, as in Wikipedia: a longer one
                    title = f"{title} {words[zipf(1)[0]].capitalize()}"
                seen.add(title.lower())
                lengths = rng.integers(8, 31, sentence_counts[i])
                body = zipf(int(lengths.sum()))
                sentences, k = [], 0
                for length in lengths:
                    sentences.append(" ".join(words[w] for w in body[k : k + length]).capitalize() + ".")
                    k += length
                file.write(json.dumps({"title": title, "sentences": sentences}) + "\n")


def titles_of(path: Path, limit: int) -> list[str]:
    titles = []
    with path.open(encoding="utf-8") as file:
        for line in file:
            titles.append(json.loads(line)["title"])
            if len(titles) == limit:
                break
    return titles


def queries(titles: list[str], n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Hits (a title in another case) and misses (a word dropped or added, or a letter changed)."""
    hits = [t.upper() if i % 2 else t.lower() for i, t in enumerate(rng.sample(titles, n))]
    misses = []
    for title in rng.sample(titles, n):
        words = title.split()
        kind = rng.randrange(3)
        if kind == 0 and len(words) > 1:
            words.pop(rng.randrange(len(words)))
        elif kind == 1:
            words.insert(rng.randrange(len(words) + 1), "Qzxv")
        else:
            w = rng.randrange(len(words))
            word = words[w]
            c = rng.randrange(len(word))
            words[w] = word[:c] + ("q" if word[c] != "q" else "z") + word[c + 1 :]
        misses.append(" ".join(words))
    return hits, misses


def latency(env: PassageEnv, searches: list[str]) -> tuple[float, float, int]:
    """p50 and p99 in ms of `search[...]`, and how many opened a page."""
    times, opened = [], 0
    for text in searches:
        start = time.perf_counter()
        observation, _ = env.step(f"search[{text}]")
        times.append((time.perf_counter() - start) * 1000)
        opened += not observation.startswith("Could not find")
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))], opened


RSS = """
import json, sys
from rawreact.env import PassageEnv
from rawreact.store import PassageStore
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1024
base = rss()
kind, path, searches = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if kind == "store":
    env = PassageEnv(PassageStore(path))
else:
    pages = {}
    with open(path, encoding="utf-8") as file:
        for line, _ in zip(file, range(int(sys.argv[4]))):
            row = json.loads(line)
            pages[row["title"]] = row["sentences"]
    env = PassageEnv(pages)
for text in searches:
    env.step(f"search[{text}]")
print(json.dumps({"base": base, "rss": rss()}))
"""


BUILD = """
import json, resource, sys
from rawreact.corpus import read_sources
from rawreact.store import build_store
info = build_store(read_sources([sys.argv[1]]), sys.argv[2])
print(json.dumps({"info": info, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def built(corpus: Path, store: Path) -> tuple[dict, float]:
    """Build in a child process: the store's info and the child's peak resident memory in MB."""
    out = subprocess.run([sys.executable, "-c", BUILD, str(corpus), str(store)], check=True, capture_output=True)
    result = json.loads(out.stdout)
    return result["info"], result["peak"]


def resident(kind: str, path: Path, searches: list[str], pages: int = 0) -> float:
    """MB resident after opening and searching, above a bare interpreter that imported rawreact."""
    out = subprocess.run(
        [sys.executable, "-c", RSS, kind, str(path), json.dumps(searches), str(pages)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    numbers = json.loads(out)
    return numbers["rss"] - numbers["base"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000, help="the smaller store and the in-memory baseline")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--dir", default="/tmp/rawreact-store-bench")
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    results = {}
    for pages in (args.small, args.pages):
        corpus = folder / f"corpus-{pages}.jsonl"
        if not corpus.exists():
            start = time.perf_counter()
            write_corpus(corpus, pages)
            print(
                f"wrote {corpus} ({corpus.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.0f} s",
                flush=True,
            )
        start = time.perf_counter()
        read = sum(1 for _, source in read_sources([corpus]) for _ in source)
        read_seconds = time.perf_counter() - start
        store = folder / f"store-{pages}.sqlite"
        store.unlink(missing_ok=True)
        start = time.perf_counter()
        info, build_peak = built(corpus, store)
        build_seconds = time.perf_counter() - start
        titles = titles_of(corpus, pages)
        hits, misses = queries(titles, args.queries, rng)
        env = PassageEnv(PassageStore(store))
        latency(env, hits[:100])  # warm the page cache, as a run's first questions do
        hit, miss = latency(env, hits), latency(env, misses)
        results[pages] = {
            "read_rate": read / read_seconds,
            "build_rate": info["pages"] / build_seconds,
            "build_seconds": build_seconds,
            "build_peak": build_peak,
            "pages": info["pages"],
            "size_mb": store.stat().st_size / 1e6,
            "corpus_mb": corpus.stat().st_size / 1e6,
            "hit": hit,
            "miss": miss,
            "rss": resident("store", store, hits[:500] + misses[:500]),
            "titles": titles,
            "searches": (hits, misses),
        }
        print(f"{pages:,} pages measured", flush=True)
    small, large = results[args.small], results[args.pages]
    memory_env = PassageEnv({t: ["x."] for t in small["titles"]})
    memory_hit, memory_miss = (
        latency(memory_env, small["searches"][0][:200]),
        latency(memory_env, small["searches"][1][:200]),
    )
    memory_rss = resident("memory", folder / f"corpus-{args.small}.jsonl", small["searches"][0][:200], args.small)
    print()
    print(f"{'':34}{args.small:>14,}{args.pages:>14,}")
    for label, key, form in (
        ("build, pages/s", "build_rate", "{:,.0f}"),
        ("  reading alone, pages/s", "read_rate", "{:,.0f}"),
        ("pages in the store", "pages", "{:,}"),
        ("build, s", "build_seconds", "{:.0f}"),
        ("build, peak memory, MB", "build_peak", "{:.0f}"),
        ("store on disk, MB", "size_mb", "{:,.0f}"),
        ("  corpus JSON-lines, MB", "corpus_mb", "{:,.0f}"),
        ("resident memory, MB", "rss", "{:.1f}"),
    ):
        print(f"{label:34}{form.format(small[key]):>14}{form.format(large[key]):>14}")
    for label, key in (("hit", "hit"), ("miss with Similar:", "miss")):
        for which, index in (("p50", 0), ("p99", 1)):
            print(f"{label + ' ' + which + ', ms':34}{small[key][index]:>14.3f}{large[key][index]:>14.3f}")
    print(f"{'hits that opened a page':34}{small['hit'][2]:>14}{large['hit'][2]:>14}  (of {args.queries})")
    print()
    print(
        f"ratios: build rate / reading alone: {large['build_rate'] / large['read_rate']:.2f}; "
        f"store size / corpus size: {large['size_mb'] / large['corpus_mb']:.2f}"
    )
    print(
        f"resident memory {args.pages:,} / {args.small:,} pages: {large['rss'] / small['rss']:.2f}x; "
        f"in-memory collection of {args.small:,} pages: {memory_rss:.0f} MB "
        f"({memory_rss / small['rss']:.0f}x the store's)"
    )
    print(
        f"in-memory scan of {args.small:,} titles: hit p50 {memory_hit[0]:.3f} ms, miss p50 {memory_miss[0]:.1f} ms, "
        f"p99 {memory_miss[1]:.1f} ms; the store's miss at {args.pages:,} pages is "
        f"{memory_miss[0] / large['miss'][0]:.0f}x faster at p50"
    )
    targets = large["hit"][1] < 1 and large["miss"][1] < 20
    print(f"targets (hit p99 < 1 ms, miss p99 < 20 ms at {args.pages:,} pages): {'met' if targets else 'NOT met'}")


if __name__ == "__main__":
    main()
