#!/usr/bin/env python3
"""Writes the Hugging Face Optimum export fixtures that
test/e2e/optimum-exports.test trains, with the loss trajectory torch
computed for each.

`optimum-cli export onnx --model DIR --task TASK OUT/` is how most users
turn a transformers checkpoint into ONNX. Its exports name both dynamic
axes, `batch_size` and `sequence_length` (an image model's `num_channels`,
`height`, `width` too), and feed the masks and positions the model takes as
graph inputs; fsdpc sizes the named axes with --dim. The exports are made
with the task's default opset and the default post-processing (tied
weights deduplicated, which needs accelerate). CI has neither optimum nor a
current torch, so the fixtures are committed; this script is how they were
made, and how to make them again (optimum-onnx pins transformers 4.x, so
it gets its own environment):

  python3 -m venv /tmp/optimum
  /tmp/optimum/bin/pip install optimum-onnx==0.1.0 onnxruntime accelerate
  /tmp/optimum/bin/python test/e2e/Inputs/optimum/generate.py

Per model it saves a small random configuration with save_pretrained,
exports it with optimum's `main_export`, writes the data the export reads
(data-NAME/: one .npy per graph input, and labels.npy), and records in
manifest.json the export, the fsdpc flags it needs and the per-step losses
of torch training the saved model itself on the same batches: fp32,
AdamW, cross entropy of the logits against the labels (the next character
for language models, a class otherwise).
"""
import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load_torch2_generator():
    """The torch 2.x fixtures' generator: its corpus windows and training
    settings (a module of the same file name as this one)."""
    path = os.path.join(HERE, "..", "torch2", "generate.py")
    spec = importlib.util.spec_from_file_location("torch2_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


torch2 = load_torch2_generator()

CONTEXT, BATCH, STEPS, LR, WEIGHT_DECAY, CLASSES = (torch2.CONTEXT, torch2.BATCH, torch2.STEPS, torch2.LR,
                                                    torch2.WEIGHT_DECAY, torch2.CLASSES)
IMAGE = torch2.IMAGE
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def gpt2(vocab):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=CONTEXT, n_embd=32, n_layer=2, n_head=4,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


def llama(vocab):
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=CONTEXT))


def bert(vocab):
    from transformers import BertConfig, BertForSequenceClassification
    # vocab + 1: the padding id is len(vocab) (torch2's padded samples).
    return BertForSequenceClassification(BertConfig(
        vocab_size=vocab + 1, pad_token_id=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=CONTEXT, num_labels=CLASSES, **NO_DROPOUT))


def bert_tokens(vocab):
    from transformers import BertConfig, BertForTokenClassification
    return BertForTokenClassification(BertConfig(
        vocab_size=vocab + 1, pad_token_id=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=CONTEXT, num_labels=CLASSES, **NO_DROPOUT))


def bert_qa(vocab):
    from transformers import BertConfig, BertForQuestionAnswering
    return BertForQuestionAnswering(BertConfig(
        vocab_size=vocab + 1, pad_token_id=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=CONTEXT, **NO_DROPOUT))


def roberta(vocab):
    from transformers import RobertaConfig, RobertaForMaskedLM
    # RoBERTa numbers positions from pad_token_id + 1 (here 1 + 1).
    return RobertaForMaskedLM(RobertaConfig(
        vocab_size=vocab + 2, pad_token_id=1, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=CONTEXT + 2, **NO_DROPOUT))


def vit(vocab):
    from transformers import ViTConfig, ViTForImageClassification
    return ViTForImageClassification(ViTConfig(
        image_size=IMAGE, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=CLASSES, **NO_DROPOUT))


def t5(vocab):
    from transformers import T5Config, T5ForConditionalGeneration
    return T5ForConditionalGeneration(T5Config(vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                               num_heads=4, dropout_rate=0.0, decoder_start_token_id=0))


def bart(vocab):
    from transformers import BartConfig, BartForConditionalGeneration
    return BartForConditionalGeneration(BartConfig(
        vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=CONTEXT,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0))


def marian(vocab):
    from transformers import MarianConfig, MarianMTModel
    return MarianMTModel(MarianConfig(
        vocab_size=vocab, decoder_vocab_size=vocab, pad_token_id=1, decoder_start_token_id=1, d_model=32,
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=CONTEXT, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0))


def pegasus(vocab):
    from transformers import PegasusConfig, PegasusForConditionalGeneration
    return PegasusForConditionalGeneration(PegasusConfig(
        vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=CONTEXT,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0))


# name -> (builder(vocab), optimum task, data kind, fsdpc's --dim sizes).
MODELS = {
    # Causal LMs without the key/value cache (`text-generation`; the
    # default `text-generation-with-past` export takes the cache as inputs,
    # an inference graph): input_ids, attention_mask and position_ids.
    "hf-gpt2": (gpt2, "text-generation", "tokens", {"sequence_length": CONTEXT}),
    "hf-llama": (llama, "text-generation", "tokens", {"sequence_length": CONTEXT}),
    # Left-padded batches, as a causal LM is fed for generation and often
    # fine-tuned: the padding masked, its labels -100, the positions
    # counted from each sample's first real token. Also exported with the
    # static batch 2 (`--no-dynamic-axes`, STATIC_EXPORTS), which fsdpc
    # re-derives: transformers builds the mask by gathering the flattened
    # attention_mask at b * T + t for torch.arange(2), a constant to renumber.
    "hf-gpt2-left-padded": (gpt2, "text-generation", "tokens-left-padded", {"sequence_length": CONTEXT}),
    "hf-llama-left-padded": (llama, "text-generation", "tokens-left-padded", {"sequence_length": CONTEXT}),
    # Right-padded samples, the attention mask marking the real tokens, the
    # class of each sample's last one; token_type_ids zero.
    "hf-bert": (bert, "text-classification", "classes-padded", {"sequence_length": CONTEXT}),
    # A class per token, the padding's labels -100 as Hugging Face's
    # DataCollatorForTokenClassification writes them, which torch's
    # F.cross_entropy (ignore_index=-100) and fsdpc's loss leave out.
    "hf-bert-tokens": (bert_tokens, "token-classification", "token-classes-padded", {"sequence_length": CONTEXT}),
    # Extractive question answering: start_logits and end_logits over the
    # positions, the loss (start_loss + end_loss) / 2 as the model computes
    # it from start_positions and end_positions (fsdpc --loss names both).
    "hf-bert-qa": (bert_qa, "question-answering", "spans-padded", {"sequence_length": CONTEXT}),
    # Masked LM logits over every position (the ids shifted by 2, past
    # RoBERTa's pad id 1, which its position ids count from).
    "hf-roberta": (roberta, "fill-mask", "tokens", {"sequence_length": CONTEXT}),
    # Encoder-decoders as one graph (`--monolith`; by default Optimum
    # writes the encoder and the decoder as two models, for generation):
    # the source, its mask and the decoder's input (the source shifted
    # right), each side's length named.
    "hf-t5": (t5, "text2text-generation", "seq2seq",
              {"encoder_sequence_length": CONTEXT, "decoder_sequence_length": CONTEXT}),
    "hf-bart": (bart, "text2text-generation", "seq2seq",
                {"encoder_sequence_length": CONTEXT, "decoder_sequence_length": CONTEXT}),
    # Translation and summarisation models whose position tables are fixed
    # sines and cosines (requires_grad False in torch): fsdpc keeps them
    # constant from their values.
    "hf-marian": (marian, "text2text-generation", "seq2seq",
                  {"encoder_sequence_length": CONTEXT, "decoder_sequence_length": CONTEXT}),
    "hf-pegasus": (pegasus, "text2text-generation", "seq2seq",
                   {"encoder_sequence_length": CONTEXT, "decoder_sequence_length": CONTEXT}),
    # Images with every axis named: num_channels, height and width.
    "hf-vit": (vit, "image-classification", "images",
               {"num_channels": 3, "height": IMAGE, "width": IMAGE}),
}


# Models also exported with a static batch (Optimum's --no-dynamic-axes):
# name -> the export's batch.
STATIC_EXPORTS = {"hf-gpt2-left-padded": 2, "hf-llama-left-padded": 2}


def left_padded(inputs, labels):
    """Each sample cut to 4 to CONTEXT tokens at its end, padded on the left
    with id 0 (masked) and labels -100."""
    lengths = np.random.default_rng(4).integers(4, CONTEXT + 1, len(inputs))
    real = np.arange(CONTEXT) >= CONTEXT - lengths[:, None]
    return np.where(real, inputs, 0), np.where(real, labels, -100).astype(np.int64), real.astype(np.int64)


def feeds_for(name, kind, inputs, pad):
    """The export's graph inputs for the samples `inputs`, by name."""
    if kind == "images":
        return {"pixel_values": inputs}
    if kind == "seq2seq":
        source, decoder = inputs
        return {"input_ids": source, "attention_mask": np.ones_like(source), "decoder_input_ids": decoder}
    if kind == "tokens-left-padded":
        ids, mask = inputs
        # Positions from each sample's first real token, as transformers
        # computes them for left-padded generation (padding at 1).
        positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1).astype(np.int64)
        return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
    ids = inputs + 2 if name == "hf-roberta" else inputs
    mask = (inputs != pad).astype(np.int64) if kind.endswith("-padded") else np.ones_like(inputs)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if name in ("hf-gpt2", "hf-llama"):
        feeds["position_ids"] = np.broadcast_to(np.arange(CONTEXT, dtype=np.int64), inputs.shape).copy()
    if name.startswith("hf-bert"):
        feeds["token_type_ids"] = np.zeros_like(inputs)
    return feeds


# The loss a question-answering model computes itself, written for fsdpc.
QA_LOSS = "(cross_entropy(start_logits, start_positions) + cross_entropy(end_logits, end_positions)) / 2"


def answer_spans(inputs, pad):
    """Each padded sample's answer: from the first of its real tokens whose
    id is largest modulo 7 to at most 2 tokens on, within the sample."""
    lengths = (inputs != pad).sum(axis=1)
    starts = np.array([np.argmax(row[:n] % 7) for row, n in zip(inputs, lengths)], np.int64)
    ends = np.minimum(starts + inputs[np.arange(len(inputs)), starts] % 3, lengths - 1).astype(np.int64)
    return {"start_positions": starts, "end_positions": ends}


class ModelOutput(torch.nn.Module):
    """A saved model as torch2's trainer takes it: the graph inputs in order
    (then any labels the model reads by name, start_positions ...), one
    field of its output out: the logits, or the loss it computes itself."""

    def __init__(self, model, names, field):
        super().__init__()
        self.model, self.names, self.field = model, names, field

    def forward(self, *inputs):
        return getattr(self.model(**dict(zip(self.names, inputs))), self.field)


def torch_losses(model, feeds, labels, replicas=1):
    """torch2's trainer: AdamW on the data's batches in order; with several
    replicas each takes its contiguous slice and its own mean loss and the
    gradients are averaged, as DDP and FSDP do (with labels of -100 a mean
    of means, not the batch's mean)."""
    if isinstance(labels, dict):  # the model's own loss of these labels
        return torch2.torch_losses(ModelOutput(model, list(feeds) + list(labels), "loss"),
                                   tuple(feeds.values()) + tuple(labels.values()), None, replicas)
    return torch2.torch_losses(ModelOutput(model, list(feeds), "logits"), tuple(feeds.values()), labels, replicas)


def main():
    from optimum.exporters.onnx import main_export
    import optimum.version
    import transformers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    manifest_path = os.path.join(HERE, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    manifest["torch"] = torch.__version__
    manifest["exporter"] = "optimum %s, transformers %s" % (optimum.version.__version__, transformers.__version__)
    manifest["training"] = {"batch": BATCH, "steps": STEPS, "lr": LR, "weight_decay": WEIGHT_DECAY,
                            "optimizer": "adamw"}
    models = manifest.setdefault("models", {})
    for name in args.models:
        build, task, kind, dims = MODELS[name]
        data_dir = os.path.join(HERE, "data-" + name[3:])
        with tempfile.TemporaryDirectory() as scratch:
            vocab, inputs, labels = torch2.make_data(scratch, {"token-classes-padded": "classes-padded",
                                                               "spans-padded": "classes-padded",
                                                               "tokens-left-padded": "tokens"}.get(kind, kind))
        if kind == "tokens-left-padded":
            ids, labels, mask = left_padded(inputs, labels)
            inputs = (ids, mask)
        if kind == "token-classes-padded":  # each real token's class, -100 on padding
            labels = np.where(inputs != vocab, inputs % CLASSES, -100).astype(np.int64)
        if kind == "spans-padded":
            labels = answer_spans(inputs, pad=vocab)
        feeds = feeds_for(name, kind, inputs, pad=vocab)
        os.makedirs(data_dir, exist_ok=True)
        for input_name, values in feeds.items():
            np.save(os.path.join(data_dir, input_name + ".npy"), values)
        for label_name, values in (labels.items() if isinstance(labels, dict) else [("labels", labels)]):
            np.save(os.path.join(data_dir, label_name + ".npy"), values)

        torch.manual_seed(0)
        model = build(vocab).eval()
        file = name + "-optimum.onnx"
        static_file = name + "-optimum-static.onnx"
        with tempfile.TemporaryDirectory() as scratch:
            model.save_pretrained(os.path.join(scratch, "model"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                main_export(os.path.join(scratch, "model"), output=os.path.join(scratch, "onnx"), task=task,
                            device="cpu", monolith=kind == "seq2seq")
                if name in STATIC_EXPORTS:
                    main_export(os.path.join(scratch, "model"), output=os.path.join(scratch, "static"), task=task,
                                device="cpu", no_dynamic_axes=True, batch_size=STATIC_EXPORTS[name],
                                sequence_length=CONTEXT)
            shutil.copy(os.path.join(scratch, "onnx", "model.onnx"), os.path.join(HERE, file))
            if name in STATIC_EXPORTS:
                shutil.copy(os.path.join(scratch, "static", "model.onnx"), os.path.join(HERE, static_file))
        exported = onnx.load(os.path.join(HERE, file))
        opset = next(o.version for o in exported.opset_import if o.domain in ("", "ai.onnx"))
        graph_inputs = sorted(i.name for i in exported.graph.input)
        assert graph_inputs == sorted(feeds), (name, graph_inputs, sorted(feeds))
        flags = ["--dim", ",".join("%s=%d" % item for item in dims.items())]
        if kind == "spans-padded":
            flags += ["--loss", QA_LOSS]
        # The final_logits_bias of BART, Marian and Pegasus is a buffer of
        # zeros [1, vocab] (BART's renamed onnx::Add_N by the exporter's
        # constant folding): fsdpc warns that it trains it, and --freeze, as
        # the warning says, keeps it constant.
        for init in exported.graph.initializer:
            values = numpy_helper.to_array(init)
            if values.ndim == 2 and values.shape[0] == 1 and not values.any():
                flags += ["--freeze", init.name]
        models[name] = {"parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                        "data": os.path.basename(data_dir),
                        "exports": [{"file": file, "exporter": "optimum", "task": task, "opset": opset,
                                     "batch": "symbolic", "fsdpc_flags": flags,
                                     **({"monolith": True} if kind == "seq2seq" else {})}] +
                                   ([{"file": static_file, "exporter": "optimum", "task": task, "opset": opset,
                                      "batch": "static %d" % STATIC_EXPORTS[name], "fsdpc_flags": []}]
                                    if name in STATIC_EXPORTS else []),
                        "losses": torch_losses(model, feeds, labels)}
        if not isinstance(labels, dict) and (labels == -100).any():
            # each rank's mean over its own labels: a trajectory per rank count
            models[name]["losses_by_ranks"] = {}
            for replicas in (1, 2):
                torch.manual_seed(0)
                models[name]["losses_by_ranks"][str(replicas)] = torch_losses(build(vocab), feeds, labels, replicas)
        print("wrote", file, "(%d KB), opset %d, inputs %s" % (os.path.getsize(os.path.join(HERE, file)) // 1024,
                                                               opset, ", ".join(graph_inputs)))
        print(name, "losses", " ".join("%.6f" % loss for loss in models[name]["losses"]))
    torch2.write_manifest(manifest_path, manifest)


if __name__ == "__main__":
    main()
