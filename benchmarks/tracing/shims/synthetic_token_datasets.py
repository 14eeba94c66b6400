"""A tokenized dataset saved with ``datasets.Dataset.save_to_disk`` replaced by small synthetic data of the
same structure, when the directory the script loads does not exist: such datasets are prepared offline
from private text, and the mirrors hold at most a Git LFS pointer for them.

What it replaces: ``datasets.Dataset.load_from_disk(PATH)`` and ``datasets.load_from_disk(PATH)`` for a
PATH that does not exist (an existing one loads as before). What it returns: a ``Dataset`` with the columns
of a causal-LM fine-tuning set, ``input_ids`` (int32), ``attention_mask`` (int8), ``labels`` (int64, equal
to ``input_ids``) and ``input_txt`` (str), every row left-padded to the same length, token ids drawn from
``[4, vocab)`` and padding id 0, the same on every run (seed 0).
``SYNTHETIC_TOKEN_DATASET=rows=20,length=64,vocab=256`` sets the sizes (these are the defaults): the vocab
must fit the model's embedding (tiny_hf_models' vocabularies have about 330 tokens).
"""
import os
import random

import datasets

_SIZES = dict(rows=20, length=64, vocab=256)
_SIZES.update({k: int(v) for k, v in (item.split("=") for item in
                                      filter(None, os.environ.get("SYNTHETIC_TOKEN_DATASET", "").split(",")))})
_original = datasets.Dataset.load_from_disk  # a staticmethod: a plain function here
_original_module_level = datasets.load_from_disk


def synthetic(rows, length, vocab):
    rng = random.Random(0)
    columns = {"input_ids": [], "attention_mask": [], "labels": [], "input_txt": []}
    for _ in range(rows):
        used = rng.randint(length // 2, length)
        ids = [0] * (length - used) + [rng.randrange(4, vocab) for _ in range(used)]
        columns["input_ids"].append(ids)
        columns["attention_mask"].append([0] * (length - used) + [1] * used)
        columns["labels"].append(list(ids))
        columns["input_txt"].append(" ".join(map(str, ids[length - used:])))
    features = datasets.Features({
        "input_ids": datasets.Sequence(datasets.Value("int32")),
        "attention_mask": datasets.Sequence(datasets.Value("int8")),
        "labels": datasets.Sequence(datasets.Value("int64")),
        "input_txt": datasets.Value("string"),
    })
    return datasets.Dataset.from_dict(columns, features=features)


def _load_from_disk(path, *args, **kwargs):
    if os.path.exists(path):
        return _original(path, *args, **kwargs)
    return synthetic(**_SIZES)


def _module_load_from_disk(path, *args, **kwargs):
    if os.path.exists(path):
        return _original_module_level(path, *args, **kwargs)
    return synthetic(**_SIZES)


datasets.Dataset.load_from_disk = staticmethod(_load_from_disk)
datasets.load_from_disk = _module_load_from_disk
