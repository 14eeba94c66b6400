"""A text-pair training file replaced by small synthetic data of the same structure: the real files
(AllNLI, SNLI pairs, ...) are downloads or Git LFS objects the mirrors do not hold.

``SYNTHETIC_TEXT_PAIRS=PATH[,PATH...]`` (relative to the working directory): each PATH that does not
exist yet is written before the script starts, as JSON lines of two sentences (``["a man plays", "a man
plays a game"]``, the format of sentence-transformers' ``*_2cols.jsonl``), gzip-compressed when PATH
ends in ``.gz``; a ``.csv`` PATH gets a ``sent0,sent1`` header and rows instead (SimCSE's format).
``SYNTHETIC_TEXT_PAIRS_LINES`` sets how many (default 512). The sentences are random words of a fixed
vocabulary, 4 to 12 words long, the same on every run (seed 0): only where the script reads its text from
changes.
"""
import csv
import gzip
import json
import os
import random

_WORDS = ("the a man woman child dog cat plays runs sat on mat game house city water book friend team "
          "small big old young good bad long short day night work home reads writes a an of with").split()


def _sentence(rng):
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))


def write(path, lines):
    rng = random.Random(0)
    pairs = []
    for _ in range(lines):
        first = _sentence(rng)
        pairs.append([first, first + " " + _sentence(rng)[: rng.randint(5, 30)].strip()])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.endswith(".csv"):
        with open(path, "w", newline="", encoding="utf8") as out:
            writer = csv.writer(out)
            writer.writerow(["sent0", "sent1"])
            writer.writerows(pairs)
        return
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf8") as out:
        for pair in pairs:
            out.write(json.dumps(pair) + "\n")


for _path in filter(None, os.environ.get("SYNTHETIC_TEXT_PAIRS", "").split(",")):
    if not os.path.exists(_path):
        write(_path, int(os.environ.get("SYNTHETIC_TEXT_PAIRS_LINES", "512")))
