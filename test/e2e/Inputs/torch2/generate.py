#!/usr/bin/env python3
"""Writes the torch 2.x export fixtures that test/e2e/torch2-exports.test
trains, with the loss trajectory torch 2.x itself computed for each.

CI has Debian's torch 1.13 only, so the fixtures are committed; this script
is how they were made, and how to make them again. It needs a current torch
(2.5 or newer) with onnxscript, transformers for the Hugging Face
models and diffusers for the diffusion UNet, from PyPI:

  python3 -m venv /tmp/torch2
  /tmp/torch2/bin/pip install torch transformers diffusers onnxscript onnx
  /tmp/torch2/bin/python test/e2e/Inputs/torch2/generate.py

Into its own folder it writes data/ (input_ids.npy, labels.npy: windows of
the example corpus), for each model its ONNX exports, and manifest.json.
Every model is exported with both of torch's exporters, TorchScript
(dynamo=False) and torch.export (dynamo=True, the default from torch 2.9),
at opsets 17 to 21 with the sample's static batch (a plain export), and
once more per exporter with a symbolic batch; the Hugging Face models
(small random configurations) at fewer opsets. The manifest lists per model
the exports, what fsdpc compiles them with, and the per-step losses of
torch training the module itself: fp32, AdamW, the data's batches in order.
"""
import argparse
import copy
import importlib.util
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..", "..")
CONTEXT = 16
BATCH = 8
STEPS = 10
LR = 3e-3
WEIGHT_DECAY = 0.01
OPSETS = [17, 18, 19, 20, 21]
DYNAMIC_OPSET = 20


def load_example(name):
    spec = importlib.util.spec_from_file_location(name + "_model", os.path.join(ROOT, "examples", name, "model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_gpt(vocab):
    return load_example("gpt").GPT(vocab, context=CONTEXT, dim=32, heads=4, layers=2)


class Logits(torch.nn.Module):
    """A Hugging Face model as the module that is exported and trained:
    input_ids in, its logits out (the loss is fsdpc's and torch's own)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


def hf_gpt2(vocab):
    from transformers import GPT2Config, GPT2LMHeadModel
    return Logits(GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=CONTEXT, n_embd=32, n_layer=2, n_head=4,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)))


def hf_llama(vocab):
    from transformers import LlamaConfig, LlamaForCausalLM
    return Logits(LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=CONTEXT)))


def hf_gemma3(vocab):
    # Gemma 3: query and key normalised per head after their heads-forward
    # transpose (RMSNorm's weight as 1 + w), the embedding scaled by
    # sqrt(d), a sliding window of 8 of the 16 positions in the first
    # layer, grouped-query attention.
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Logits(Gemma3ForCausalLM(Gemma3TextConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=CONTEXT, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], pad_token_id=0, bos_token_id=1, eos_token_id=2)))


def hf_gemma2(vocab):
    # Gemma 2: attention scores soft-capped (c tanh(s / c)) before the
    # softmax, here with a cap of 1 on scores of scale 1 and weights of
    # std 0.5 so that the cap bends most of them (Gemma 2's own cap is 50),
    # the logits capped at 30; sliding and full attention layers.
    from transformers import Gemma2Config, Gemma2ForCausalLM
    return Logits(Gemma2ForCausalLM(Gemma2Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=CONTEXT, sliding_window=8,
        query_pre_attn_scalar=1, attn_logit_softcapping=1.0, final_logit_softcapping=30.0, initializer_range=0.5,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)))


def hf_glm4(vocab):
    # GLM-4: the interleaved rotation (pairs of adjacent features, cos and
    # sin repeat_interleave'd) on the first half of each head's features,
    # grouped-query attention, norms after attention and the MLP too.
    from transformers import Glm4Config, Glm4ForCausalLM
    return Logits(Glm4ForCausalLM(Glm4Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=CONTEXT, pad_token_id=0)))


def hf_gpt_oss(vocab):
    # GPT-OSS: attention sinks (a learned logit per head in each softmax
    # denominator, concatenated as a last column and sliced off again after
    # the softmax, the rows' maximum subtracted first), set here from -2 to
    # 2, so that a row gives its sink from under 1% to most of its weight; the rotation in halves
    # (x1 cos - x2 sin, x2 cos + x1 sin); sliding and full attention
    # layers; biased projections; a mixture of 4 experts, top 2, with
    # clamped SwiGLU experts.
    from transformers import GptOssConfig, GptOssForCausalLM
    model = GptOssForCausalLM(GptOssConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=CONTEXT, sliding_window=8,
        num_local_experts=4, num_experts_per_tok=2, experts_implementation="batched_mm", pad_token_id=0))
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(torch.linspace(-2.0, 2.0, layer.self_attn.sinks.numel()))
    return Logits(model)


def hf_mixtral(vocab):
    # Mixture of experts, top 2 of 4 per token. transformers' default expert
    # kernel (grouped_mm) is a custom op that no exporter converts and its
    # "eager" one loops over the experts a batch routes to (NonZero, a
    # data-dependent shape); "batched_mm" gathers each token's experts'
    # weights and multiplies them batched, which exports.
    from transformers import MixtralConfig, MixtralForCausalLM
    return Logits(MixtralForCausalLM(MixtralConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, num_local_experts=4, num_experts_per_tok=2,
        experts_implementation="batched_mm")))


def hf_bert(vocab):
    from transformers import BertConfig, BertForSequenceClassification
    return Logits(BertForSequenceClassification(BertConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=CONTEXT, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=CLASSES)))


def hf_gpt2_classifier(vocab):
    # The padding token is one past the corpus's characters; the head reads
    # each sample's last token that is not padding (an integer argmax).
    from transformers import GPT2Config, GPT2ForSequenceClassification
    return Logits(GPT2ForSequenceClassification(GPT2Config(
        vocab_size=vocab + 1, n_positions=CONTEXT, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, num_labels=CLASSES, pad_token_id=vocab)))


def hf_llama_classifier(vocab):
    from transformers import LlamaConfig, LlamaForSequenceClassification
    return Logits(LlamaForSequenceClassification(LlamaConfig(
        vocab_size=vocab + 1, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=CONTEXT, num_labels=CLASSES, pad_token_id=vocab)))


def hf_bart_classifier(vocab):
    # The head reads the decoder's state at each sample's end-of-sequence
    # token (id vocab + 1, one per sample, padding after it), selected with a
    # boolean mask: x[ids == eos].view(batch, -1, dim)[:, -1], which exports
    # as NonZero. The decoder's input is the ids shifted right (an integer
    # ScatterND, or select_scatter in the dynamo export).
    from transformers import BartConfig, BartForSequenceClassification
    return Logits(BartForSequenceClassification(BartConfig(
        vocab_size=vocab + 2, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=CONTEXT,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, classifier_dropout=0.0, num_labels=CLASSES,
        pad_token_id=vocab, bos_token_id=vocab + 1, eos_token_id=vocab + 1, decoder_start_token_id=vocab + 1,
        forced_eos_token_id=None)))


def hf_roberta(vocab):
    # Position ids from the input in the graph: a cumulative sum of the
    # tokens that are not padding (integers), offset by the padding id.
    from transformers import RobertaConfig, RobertaForSequenceClassification
    return Logits(RobertaForSequenceClassification(RobertaConfig(
        vocab_size=vocab + 1, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=vocab + CONTEXT + 2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=CLASSES, pad_token_id=vocab)))


class Seq2SeqLogits(torch.nn.Module):
    """An encoder-decoder model: source ids and decoder ids in, logits out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits


def hf_t5(vocab):
    from transformers import T5Config, T5ForConditionalGeneration
    return Seq2SeqLogits(T5ForConditionalGeneration(T5Config(
        vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, dropout_rate=0.0,
        decoder_start_token_id=0)))


class ImageLogits(torch.nn.Module):
    """An image classifier: pixel_values in, its logits out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


IMAGE = 16  # pixels a side


def hf_vit(vocab):
    from transformers import ViTConfig, ViTForImageClassification
    return ImageLogits(ViTForImageClassification(ViTConfig(
        image_size=IMAGE, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=CLASSES)))


class TinyUNet(torch.nn.Module):
    """A small encoder-decoder CNN with the layers decoders use: Conv,
    BatchNorm (trained with batch statistics), MaxPool, GroupNorm, SiLU,
    ConvTranspose, bilinear F.interpolate and a skip connection; a pooled
    linear head classifies the image."""

    def __init__(self, classes):
        super().__init__()
        nn = torch.nn
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.fuse = nn.Conv2d(16, 8, 3, padding=1)
        self.head = nn.Linear(8, classes)

    def forward(self, pixel_values):
        d = self.down(pixel_values)
        m = self.mid(self.pool(d))
        u = self.up(m) + F.interpolate(m[:, :8], scale_factor=2, mode="bilinear", align_corners=False)
        f = F.relu(self.fuse(torch.cat([u, d], 1)))
        return self.head(f.mean((2, 3)))


def hf_swin(vocab):
    # Windowed attention: shifted windows (torch.roll) with their masks in
    # the first stage's second block, patch merging, F.pad of the windows.
    from transformers import SwinConfig, SwinForImageClassification
    return ImageLogits(SwinForImageClassification(SwinConfig(
        image_size=IMAGE, patch_size=2, num_channels=3, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0, num_labels=CLASSES)))


def tiny_unet(vocab):
    return TinyUNet(CLASSES)


class DiffusersUNetClassifier(torch.nn.Module):
    """diffusers' UNet2DModel (the DDPM denoiser: ResNet blocks with
    GroupNorm and a timestep embedding, self-attention at the lower
    resolution, upsampling with skip connections), its output pooled and
    classified so that the common data trains it. The data has no
    timesteps: each image's comes from its pixels, so that the timestep
    embedding is computed per sample as in a denoising step (a constant
    timestep would fold the whole embedding MLP away in the dynamo export)."""

    def __init__(self, classes):
        super().__init__()
        import diffusers
        self.unet = diffusers.UNet2DModel(
            sample_size=IMAGE, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=4, attention_head_dim=8)
        self.head = torch.nn.Linear(3, classes)

    def forward(self, pixel_values):
        timestep = 100 * pixel_values.abs().mean((1, 2, 3))
        return self.head(self.unet(pixel_values, timestep).sample.mean((2, 3)))


def diffusers_unet(vocab):
    return DiffusersUNetClassifier(CLASSES)


CLASSES = 3
UNOPTIMIZED = True  # a variant's fourth element: torch.onnx.export(..., optimize=False)
ALL_VARIANTS = [(dynamo, opset, False) for dynamo in (False, True) for opset in OPSETS] + \
    [(dynamo, DYNAMIC_OPSET, True) for dynamo in (False, True)]

# name -> builder(vocab) of a module mapping input_ids [batch, context] to
# logits, the labels it is trained on ("tokens": the next character, or
# "classes": one class per sample), and its export variants (exporter is
# dynamo, opset, symbolic batch): fewer for the larger models, the exporter
# paths rather than every opset. Each is built after torch.manual_seed(0).
MODELS = {
    "gpt": (example_gpt, "tokens", ALL_VARIANTS),
    # The dynamo exporter's optimizer drops GPT-2's zero Conv1D biases
    # (addmm with a zero input folds away): that export cannot train as torch
    # does, and fsdpc says so (LOSSY below).
    # Without its optimizer (optimize=False), the dynamo export keeps every
    # parameter, and splits the attention's projection with SplitToSequence.
    "hf-gpt2": (hf_gpt2, "tokens", [(False, 17, False), (False, DYNAMIC_OPSET, True), (True, 18, False),
                                    (True, 18, False, UNOPTIMIZED)]),
    # torch cannot export grouped-query attention through TorchScript.
    "hf-llama": (hf_llama, "tokens", [(True, 18, False), (True, DYNAMIC_OPSET, True)]),
    # Without the exporter's optimizer, which folds the (1 + w) norm weights
    # and the rotary tables into initializers fsdpc cannot tell from
    # parameters.
    "hf-gemma3": (hf_gemma3, "tokens", [(True, 18, False, UNOPTIMIZED)]),
    "hf-gemma2": (hf_gemma2, "tokens", [(True, 18, False, UNOPTIMIZED)]),
    "hf-glm4": (hf_glm4, "tokens", [(True, 18, False, UNOPTIMIZED)]),
    "hf-gpt-oss": (hf_gpt_oss, "tokens", [(True, 18, False, UNOPTIMIZED)]),
    # Routing: TopK of the router's softmax, each token's experts' weights
    # gathered by those indices (their gradients scattered back), the
    # outputs weighted by the routing probabilities.
    "hf-mixtral": (hf_mixtral, "tokens", [(True, 18, False), (True, DYNAMIC_OPSET, True)]),
    # Sequence classification: logits [batch, classes]; the dynamo exporter
    # drops the pooler's and classifier's zero biases (LOSSY).
    "hf-bert": (hf_bert, "classes", [(False, 17, False), (False, DYNAMIC_OPSET, True), (True, 18, False)]),
    # Decoder classifiers on right-padded samples: the head takes the logits
    # at each sample's last token that is not padding, a position computed
    # in the graph with integer arithmetic ((ids != pad) times positions,
    # ArgMax) and gathered per sample.
    "hf-gpt2-classifier": (hf_gpt2_classifier, "classes-padded", [(False, 17, False), (False, DYNAMIC_OPSET, True)]),
    "hf-llama-classifier": (hf_llama_classifier, "classes-padded", [(True, 18, False), (True, DYNAMIC_OPSET, True)]),
    # An encoder-decoder classifier selecting each sample's end-of-sequence
    # state with a boolean mask (NonZero); the dynamo exporter's optimizer
    # drops zero biases (LOSSY), so the exports that train against torch are
    # made without it. A static dynamo export holds the decoder's input
    # built at the sample's batch (zeros, the ids scattered into them, the
    # start token scattered by folded indices), which fsdpc re-derives; a
    # static TorchScript export also holds the decoder's mask gathered by
    # flat positions, which it does not (it says so): symbolic only there.
    "hf-bart-classifier": (hf_bart_classifier, "classes-eos", [(False, 17, True), (False, DYNAMIC_OPSET, True),
                                                               (True, 18, False, UNOPTIMIZED),
                                                               (True, DYNAMIC_OPSET, True, UNOPTIMIZED),
                                                               (True, 18, False)]),
    # An encoder whose position ids are computed from the padded input.
    "hf-roberta": (hf_roberta, "classes-padded", [(False, 17, False), (False, DYNAMIC_OPSET, True)]),
    # Encoder-decoder: the decoder reads the source shifted by one character
    # and predicts the next one; relative position buckets fold at import.
    "hf-t5": (hf_t5, "seq2seq", [(False, 17, False)]),
    # Images: a patch embedding (a strided Conv), a class token, attention.
    # The dynamo export folds the class token, expanded to the sample's
    # batch, into one initializer that a Concat reads (and loses the zero
    # Conv bias: LOSSY).
    "hf-vit": (hf_vit, "images", [(False, 17, False), (False, DYNAMIC_OPSET, True), (True, 18, False)]),
    # torch 2.15's dynamo exporter cannot decompose Swin.
    "hf-swin": (hf_swin, "images", [(False, 17, False), (False, DYNAMIC_OPSET, True)]),
    # BatchNorm in training mode, exported so (TrainingMode.TRAINING): each
    # rank normalises its own slice of the batch, so torch's trajectory is
    # recorded for 1 and 2 replicas. The dynamo exporter writes a BatchNorm
    # in training mode as an inference BatchNormalization (its FX metadata
    # says training, and fsdpc restores it), which its optimizer then folds
    # into the Conv before it: exported with optimize=False only.
    "tiny-unet": (tiny_unet, "images", [(False, 17, False), (False, 18, False), (False, DYNAMIC_OPSET, True),
                                        (True, 18, False, UNOPTIMIZED)]),
    # diffusers' UNet (pip install diffusers): the dynamo exporter's
    # optimizer merges the GroupNorm weights of ones and biases of zeros,
    # reshaped to [C, 1, 1], into one initializer per channel count, and
    # the ones and zeros its GroupNorm translation makes for
    # InstanceNormalization into one per group count; each norm's
    # parameters train apart, those constants not at all.
    "diffusers-unet": (diffusers_unet, "images", [(False, 17, False), (True, 18, False), (True, DYNAMIC_OPSET, True)]),
}

# Models exported and trained in training mode (BatchNorm's batch
# statistics); their trajectories depend on how the batch is split.
TRAINING_MODE = {"tiny-unet"}
# TorchScript's constant folding folds Swin's relative position bias, a
# parameter table gathered at constant indices, into one constant per
# block ([1, heads, 49, 49]): nothing in the file says it was a parameter,
# and trained as one it would no longer share its entries. Exported without
# folding, the table and the Gather stay.
NO_CONSTANT_FOLDING = {"hf-swin"}
REPLICAS = [1, 2]

# Exports that lost parameters in the exporter; the test checks that fsdpc
# warns about them instead of comparing with torch.
LOSSY = {("hf-gpt2", True, 18, False): "the dynamo optimizer folded the zero Conv1D biases away",
         ("hf-bert", True, 18, False): "the dynamo optimizer folded the zero pooler and classifier biases away",
         ("hf-vit", True, 18, False): "the dynamo optimizer folded the zero Conv and classifier biases away",
         ("hf-bart-classifier", True, 18, False): "the dynamo optimizer folded the classification head's zero biases away"}


def make_data(out_dir, labels_kind="tokens"):
    text = open(os.path.join(ROOT, "examples", "gpt", "corpus.txt"), encoding="utf-8").read()
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text], np.int64)
    starts = range(0, len(ids) - CONTEXT - 1, 7)
    order = np.random.default_rng(0).permutation(len(starts))[:BATCH * STEPS]
    inputs = np.stack([ids[s:s + CONTEXT] for s in starts])[order]
    labels = np.stack([ids[s + 1:s + CONTEXT + 1] for s in starts])[order]
    if labels_kind == "classes":  # a class per sample, from its first character
        labels = (inputs[:, 0] % CLASSES).astype(np.int64)
    if labels_kind == "classes-padded":  # samples of 4 to CONTEXT characters, padded on the right with
        # id len(vocab); the class is the sample's last character's
        lengths = np.random.default_rng(2).integers(4, CONTEXT + 1, len(inputs))
        inputs = np.where(np.arange(CONTEXT) < lengths[:, None], inputs, len(vocab))
        labels = (inputs[np.arange(len(inputs)), lengths - 1] % CLASSES).astype(np.int64)
    if labels_kind == "classes-eos":  # samples of 4 to CONTEXT - 1 characters, an end-of-sequence token
        # (id len(vocab) + 1) after each, then padding (id len(vocab)); the class is the last character's
        lengths = np.random.default_rng(3).integers(4, CONTEXT, len(inputs))
        positions = np.arange(CONTEXT)
        inputs = np.where(positions < lengths[:, None], inputs, len(vocab))
        inputs[np.arange(len(inputs)), lengths] = len(vocab) + 1
        labels = (inputs[np.arange(len(inputs)), lengths - 1] % CLASSES).astype(np.int64)
    if labels_kind == "images":  # random images, a class from their mean colour
        rng = np.random.default_rng(1)
        pixels = rng.standard_normal((len(inputs), 3, IMAGE, IMAGE)).astype(np.float32)
        labels = np.argmax(pixels.mean(axis=(2, 3)), axis=1).astype(np.int64)
        os.makedirs(out_dir, exist_ok=True)
        np.save(os.path.join(out_dir, "pixel_values.npy"), pixels)
        np.save(os.path.join(out_dir, "labels.npy"), labels)
        return len(vocab), pixels, labels
    if labels_kind == "seq2seq":  # the decoder reads the source, one step later
        decoder = np.concatenate([np.zeros((len(inputs), 1), np.int64), inputs[:, :-1]], axis=1)
        os.makedirs(out_dir, exist_ok=True)
        np.save(os.path.join(out_dir, "decoder_input_ids.npy"), decoder)
        inputs = (inputs, decoder)
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "input_ids.npy"), inputs[0] if isinstance(inputs, tuple) else inputs)
    np.save(os.path.join(out_dir, "labels.npy"), labels)
    return len(vocab), inputs, labels


def build(name, vocab):
    torch.manual_seed(0)
    model = MODELS[name][0](vocab)
    return model.train() if name in TRAINING_MODE else model.eval()


def export(model, path, dynamo, opset, symbolic, kind="tokens", fold=True, optimize=True):
    ids = torch.zeros(BATCH, CONTEXT, dtype=torch.long)
    names = {"seq2seq": ["input_ids", "decoder_input_ids"], "images": ["pixel_values"]}.get(kind, ["input_ids"])
    if kind == "images":
        ids = torch.zeros(BATCH, 3, IMAGE, IMAGE)
    if kind == "classes-eos":  # the head needs one end-of-sequence token per sample
        ids[:, -1] = model.model.config.eos_token_id
    kwargs = dict(input_names=names, output_names=["logits"], opset_version=opset, dynamo=dynamo)
    if dynamo:
        kwargs["external_data"] = False
        kwargs["optimize"] = optimize
        if symbolic:
            kwargs["dynamic_shapes"] = {names[0]: {0: torch.export.Dim("batch", min=1, max=4096)}}
    elif symbolic:
        kwargs["dynamic_axes"] = {names[0]: {0: "batch"}, "logits": {0: "batch"}}
    if model.training and not dynamo:
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
        kwargs["do_constant_folding"] = False
    if not fold and not dynamo:
        kwargs["do_constant_folding"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,) * len(names), path, **kwargs)


def torch_losses(model, inputs, labels, replicas=1):
    """Trains `model` for STEPS steps; with several replicas (DDP and FSDP
    without SyncBatchNorm), each runs its own copy on its contiguous slice
    of the batch and the gradients are averaged. The loss is the cross
    entropy of the model's logits against `labels`, or with labels None
    what the model returns (it reads its labels among the inputs)."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    copies = [copy.deepcopy(model) for _ in range(replicas)] if replicas > 1 else [model]
    local = BATCH // replicas
    losses = []
    for step in range(STEPS):
        feeds = inputs if isinstance(inputs, tuple) else (inputs,)
        optimizer.zero_grad()
        total = 0.0
        for rank, replica in enumerate(copies):
            if replica is not model:
                with torch.no_grad():
                    for mine, shared in zip(replica.parameters(), model.parameters()):
                        mine.copy_(shared)
                replica.zero_grad()
            batch = slice(step * BATCH + rank * local, step * BATCH + (rank + 1) * local)
            logits = replica(*(torch.tensor(x[batch]) for x in feeds))
            loss = logits if labels is None else F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                                 torch.tensor(labels[batch]).reshape(-1))
            (loss / replicas).backward()
            total += loss.item() / replicas
            if replica is not model:
                for mine, shared in zip(replica.parameters(), model.parameters()):
                    shared.grad = mine.grad.clone() if shared.grad is None else shared.grad + mine.grad
        optimizer.step()
        losses.append(total)
    return losses


def write_manifest(path, manifest):
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    vocab, _, _ = make_data(os.path.join(HERE, "data"))
    manifest_path = os.path.join(HERE, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    manifest["torch"] = torch.__version__
    manifest["training"] = {"batch": BATCH, "steps": STEPS, "lr": LR, "weight_decay": WEIGHT_DECAY,
                            "optimizer": "adamw"}
    models = manifest.setdefault("models", {})
    for name in args.models:
        _, labels_kind, variants = MODELS[name]
        data = "data" if labels_kind == "tokens" else "data-" + labels_kind
        _, inputs, labels = make_data(os.path.join(HERE, data), labels_kind)
        exports = []
        for dynamo, opset, symbolic, *unoptimized in variants:
            optimize = not unoptimized
            file = "%s-%s-opset%d%s%s.onnx" % (name, "dynamo" if dynamo else "torchscript", opset,
                                               "-symbolic" if symbolic else "", "" if optimize else "-unoptimized")
            export(build(name, vocab), os.path.join(HERE, file), dynamo, opset, symbolic, labels_kind,
                   fold=name not in NO_CONSTANT_FOLDING, optimize=optimize)
            exports.append({"file": file, "exporter": "dynamo" if dynamo else "torchscript", "opset": opset,
                            "batch": "symbolic" if symbolic else "static"})
            if not optimize:
                exports[-1]["optimize"] = False
            if optimize and (name, dynamo, opset, symbolic) in LOSSY:
                exports[-1]["lossy"] = LOSSY[(name, dynamo, opset, symbolic)]
            print("wrote", file, "(%d KB)" % (os.path.getsize(os.path.join(HERE, file)) // 1024))
        model = build(name, vocab)
        models[name] = {"parameters": sum(p.numel() for p in model.parameters()), "data": data, "exports": exports,
                        "losses": torch_losses(model, inputs, labels)}
        if name in TRAINING_MODE:
            models[name]["losses_by_ranks"] = {str(r): torch_losses(build(name, vocab), inputs, labels, r)
                                               for r in REPLICAS}
        print(name, "losses", " ".join("%.6f" % l for l in models[name]["losses"]))
    write_manifest(manifest_path, manifest)


if __name__ == "__main__":
    main()
