"""A tiny random causal LM (well under 1 MB) with a byte-level tokenizer, to run the LLM server fast.

It answers nonsense, but through the same TransformersBackend calls as the embedded Gemma-3-270M:
tokenising, left-padded batches, stop strings, token counts. Nothing is downloaded: the tokenizer
is trained here on a few sentences (byte-level BPE, so any text, newlines included, encodes).
"""

from __future__ import annotations

from pathlib import Path

TEXTS = ["Question: Who was the father of Hermann II?\nAnswer: Louis the Junker\n\n",
         "Passages:\n[1] Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
         "Which candidate answers the question correctly? Candidate answers:\n1. Paris\n2. London"] * 20


def write_tiny_llm(path: Path) -> Path:
    """Save the tiny model and its tokenizer into the folder ``path``; returns ``path``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(TEXTS, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>",
                                                eos_token="</s>")
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path
