"""Hugging Face hub downloads replaced by tiny randomly initialised models of the same class and an offline
tokenizer: the hub cannot be reached here, and a real checkpoint would be far too slow on a CPU.

What it replaces: ``from_pretrained(NAME)`` of ``AutoConfig``, ``AutoTokenizer``, the ``AutoModel*`` classes
and the model classes (``BertModel.from_pretrained``), when NAME is not a local directory (a local one, such
as a checkpoint the script saved itself, loads as before). What it returns instead:

- a config of the architecture NAME names (``model_type`` guessed from the name: bert, roberta, gpt2, llama,
  gemma, mistral, qwen2; ``TINY_HF_MODEL_TYPE`` overrides the guess), shrunk to 2 layers, hidden size 64,
  4 heads (2 key/value heads), intermediate size 128, and the tokenizer's vocabulary;
- a model of the class the script asked for, built from that config with random weights (``dtype`` /
  ``torch_dtype`` honoured);
- a word-piece tokenizer over a small built-in vocabulary (common English words, letters, digits,
  punctuation: any ASCII text tokenizes) with the family's special tokens and templates ([CLS] ... [SEP]
  for bert, <s> ... </s> for roberta, a leading <s> for llama/gemma/mistral, none for gpt2/qwen2).

The script's own code, the model's forward and everything it runs on the device are unchanged: only the
weights are random and the sizes small.
"""
import os

import transformers
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerFast
from transformers.models.auto import auto_factory

WORDS = """the a an of to and in is was for on that with as by at from it this be are or his her their
he she they we you i not but have has had will would can could one two three first new time year people
man woman child day world life hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye job word
business issue side kind head house service friend father power hour game line end member law car city
community name president team minute idea kid body information back parent face others level office door
health person art war history party result change morning reason research girl guy moment air teacher
force education dog cat sat mat runs ran play plays played good bad big small old young long short high
low funny thing once upon here there what when where who why how time sentence text example train model
""".split()
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PUNCTUATION = list(".,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`")

# model_type -> (special tokens in id order, roles, template for one sequence, for a pair)
FAMILIES = {
    "bert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
             dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"),
             "[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1"),
    "roberta": (["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                dict(bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>", cls_token="<s>",
                     sep_token="</s>", mask_token="<mask>"),
                "<s> $A </s>", "<s> $A </s> </s> $B </s>"),
    "gpt2": (["<|endoftext|>"], dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"),
             None, None),
    "llama": (["<unk>", "<s>", "</s>"], dict(unk_token="<unk>", bos_token="<s>", eos_token="</s>"),
              "<s> $A", "<s> $A <s> $B"),
    "gemma": (["<pad>", "<eos>", "<bos>", "<unk>"],
              dict(pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"),
              "<bos> $A", "<bos> $A <bos> $B"),
    "qwen2": (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"],
              dict(pad_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<unk>"), None, None),
}
FAMILIES["mistral"] = FAMILIES["llama"]
# name fragments -> model_type, most specific first
GUESSES = (("roberta", "roberta"), ("gpt2", "gpt2"), ("distilgpt", "gpt2"), ("gemma", "gemma"),
           ("mistral", "mistral"), ("mixtral", "mistral"), ("qwen", "qwen2"), ("llama", "llama"),
           ("leolm", "llama"), ("bert", "bert"), ("minilm", "bert"), ("mpnet", "bert"))
DECODERS = ("gpt2", "llama", "gemma", "mistral", "qwen2")

_original_config = AutoConfig.from_pretrained.__func__
_original_tokenizer = AutoTokenizer.from_pretrained.__func__
_original_auto_model = auto_factory._BaseAutoModelClass.from_pretrained.__func__
_original_model = PreTrainedModel.from_pretrained.__func__


def _is_local(name):
    return isinstance(name, (str, os.PathLike)) and os.path.isdir(name)


def model_type(name):
    forced = os.environ.get("TINY_HF_MODEL_TYPE")
    if forced:
        return forced
    lowered = str(name).lower()
    for fragment, kind in GUESSES:
        if fragment in lowered:
            return kind
    return "bert"


def _vocabulary(kind):
    specials = FAMILIES[kind][0]
    tokens = list(specials)
    for token in WORDS + list(LETTERS) + PUNCTUATION + ["##" + c for c in LETTERS]:
        if token not in tokens:
            tokens.append(token)
    return {token: index for index, token in enumerate(tokens)}


def tiny_tokenizer(name):
    kind = model_type(name)
    specials, roles, single, pair = FAMILIES[kind]
    vocab = _vocabulary(kind)
    backend = Tokenizer(WordPiece(vocab, unk_token=roles["unk_token"], max_input_chars_per_word=100))
    backend.normalizer = normalizers.NFKC()
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    if single is not None:
        backend.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=[(t, vocab[t]) for t in specials if t in single + pair])
    input_names = ["input_ids", "token_type_ids", "attention_mask"] if kind == "bert" else ["input_ids", "attention_mask"]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=512,
                                        model_input_names=input_names, **roles)
    tokenizer.name_or_path = str(name)
    return tokenizer


def tiny_config(name, **overrides):
    kind = model_type(name)
    tokenizer = tiny_tokenizer(name)
    ids = {role: tokenizer.convert_tokens_to_ids(token) for role, token in FAMILIES[kind][1].items()
           if role in ("pad_token", "bos_token", "eos_token")}
    sizes = dict(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=512)
    if kind == "gpt2":
        sizes = dict(vocab_size=len(tokenizer), n_embd=64, n_layer=2, n_head=4, n_positions=512,
                     bos_token_id=ids["bos_token"], eos_token_id=ids["eos_token"])
    elif kind in DECODERS:
        sizes.update(num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
                     **{f"{role[:-6]}_token_id": value for role, value in ids.items()})
    elif kind == "roberta":
        sizes.update(max_position_embeddings=514, type_vocab_size=1, pad_token_id=ids["pad_token"],
                     bos_token_id=ids["bos_token"], eos_token_id=ids["eos_token"])
    else:
        sizes.update(pad_token_id=ids["pad_token"])
    for key in list(overrides):  # from_pretrained(name, num_labels=3, ...): config attributes
        if key in ("num_labels", "output_hidden_states", "output_attentions", "problem_type", "id2label",
                   "label2id", "use_cache", "hidden_dropout_prob", "attention_probs_dropout_prob"):
            sizes[key] = overrides.pop(key)
    config = AutoConfig.for_model(kind, **sizes)
    config._name_or_path = str(name)
    return config


def _config_from_pretrained(cls, name, *args, **kwargs):
    if _is_local(name):
        return _original_config(cls, name, *args, **kwargs)
    config = tiny_config(name, **kwargs)
    return (config, {}) if kwargs.get("return_unused_kwargs") else config


def _tokenizer_from_pretrained(cls, name, *args, **kwargs):
    if _is_local(name):
        return _original_tokenizer(cls, name, *args, **kwargs)
    return tiny_tokenizer(name)


def _build(make, name, kwargs):
    config = kwargs.pop("config", None)
    if config is None or isinstance(config, str):
        config = tiny_config(name, **kwargs)
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
    model = make(config)
    if dtype is not None and dtype != "auto":
        model = model.to(dtype)
    model.name_or_path = str(name)
    return model


def _auto_model_from_pretrained(cls, name, *args, **kwargs):
    if _is_local(name):
        return _original_auto_model(cls, name, *args, **kwargs)
    return _build(cls.from_config, name, kwargs)


def _model_from_pretrained(cls, name, *args, **kwargs):
    if _is_local(name):
        return _original_model(cls, name, *args, **kwargs)

    def make(config):
        if not isinstance(config, cls.config_class):  # the class asked for decides the architecture
            config = cls.config_class(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
        return cls(config)

    return _build(make, name, kwargs)


AutoConfig.from_pretrained = classmethod(_config_from_pretrained)
AutoTokenizer.from_pretrained = classmethod(_tokenizer_from_pretrained)
auto_factory._BaseAutoModelClass.from_pretrained = classmethod(_auto_model_from_pretrained)
PreTrainedModel.from_pretrained = classmethod(_model_from_pretrained)
transformers.tiny_hf_models_active = True
