#!/usr/bin/env python3
"""Exports small random Hugging Face models (transformers, and diffusers'
denoisers and VAE) with torch's ONNX exporter and
checks that fsdpc compiles them and that fsdp-run's forward pass gives
torch's logits: a survey of the exports users bring, not a CI test (it
needs a current torch and transformers from PyPI, which CI does not have).

  python3 -m venv /tmp/torch2
  /tmp/torch2/bin/pip install torch transformers diffusers onnxscript onnx
  /tmp/torch2/bin/python tools/hf-export-sweep.py [--dynamo [--no-optimize]] [--build build] [MODEL ...]

With --optimum it exports each model as Hugging Face Optimum does
(`optimum-cli export onnx --task TASK`, the task's default opset, the
whole model as one graph), which pins transformers 4.x, so in its own
environment:

  python3 -m venv /tmp/optimum
  /tmp/optimum/bin/pip install optimum-onnx onnxruntime accelerate
  /tmp/optimum/bin/python tools/hf-export-sweep.py --optimum [MODEL ...]

Optimum's exports take the attention mask (ones here), position ids
(0, 1, ...) and token type ids (zeros) as inputs and name every dynamic
axis; the sweep sizes them with --batch-size and --dim.

For each model (all by default) it prints one line: OK with the largest
difference of the logits from torch's (fp32, a batch of 2), MISMATCH where
that exceeds 1e-4 of their scale (either with PARAMETERS where fsdpc would
train another number of parameters than torch's module has: the exporter
folded one, or fsdpc took a folded constant for one), FAIL with fsdpc's error, RUNFAIL with
fsdp-run's, or EXPORT-ERROR where torch cannot export the model. A
model with softmaxes says how many graph-fuse made one attention op (the
others keep their T x T scores; a mixture of experts' router is one).
TorchScript (the default) cannot export grouped-query attention (Mistral,
Qwen2, Phi-3, Gemma, StableLM): use --dynamo for those.
"""
import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

VOCAB, CONTEXT, BATCH, IMAGE = 64, 16, 2, 32

BART_SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
TEXT = {  # name: (config class, model class, config arguments beyond the common ones)
    "roberta-cls": ("RobertaConfig", "RobertaForSequenceClassification", dict(pad_token_id=1)),
    "distilbert-cls": ("DistilBertConfig", "DistilBertForSequenceClassification",
                       dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64)),
    "albert-cls": ("AlbertConfig", "AlbertForSequenceClassification", dict(embedding_size=16)),
    "electra-cls": ("ElectraConfig", "ElectraForSequenceClassification", dict(embedding_size=16)),
    "deberta-v2-cls": ("DebertaV2Config", "DebertaV2ForSequenceClassification", dict()),
    "bert-mlm": ("BertConfig", "BertForMaskedLM", dict()),
    "gpt2-tokencls": ("GPT2Config", "GPT2ForTokenClassification", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "gpt2-cls": ("GPT2Config", "GPT2ForSequenceClassification",
                 dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, pad_token_id=0)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=2)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_key_value_heads=2)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict()),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(num_key_value_heads=2, head_dim=8)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(num_key_value_heads=2)),
    # Mixture of experts: "batched_mm" gathers each token's experts' weights
    # (the default, grouped_mm, is a custom op no exporter converts; "eager"
    # loops over the experts a batch routes to: NonZero).
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_key_value_heads=2, num_local_experts=4, experts_implementation="batched_mm")),
    "qwen2-moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=32, experts_implementation="batched_mm")),
    # Decoders of 2024-2025: LLaMA 3's scaled rotary angles, Qwen3's and
    # OLMo2's normalised query and key, Gemma 2's soft-capped scores and
    # sliding window, SmolLM3's layers without rotation, Granite's
    # multipliers.
    "llama3": ("LlamaConfig", "LlamaForCausalLM",
               dict(num_key_value_heads=2, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                            high_freq_factor=4.0,
                                                            original_max_position_embeddings=16))),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(num_key_value_heads=2, head_dim=8)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(num_key_value_heads=2)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(num_key_value_heads=2, head_dim=8, sliding_window=8)),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(num_key_value_heads=2, head_dim=8, sliding_window=8)),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", dict(num_key_value_heads=2)),
    "qwen3-moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_key_value_heads=2, head_dim=8, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, experts_implementation="batched_mm")),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(num_key_value_heads=2)),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0, sliding_window=8)),
    "glm": ("GlmConfig", "GlmForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, pad_token_id=0,
                   experts_implementation="batched_mm")),
    "helium": ("HeliumConfig", "HeliumForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "deepseek-v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    dict(num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16,
                         qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, pad_token_id=0,
                         experts_implementation="batched_mm")),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "ernie4.5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "seed-oss": ("SeedOssConfig", "SeedOssForCausalLM", dict(num_key_value_heads=2, head_dim=8, pad_token_id=0)),
    "gpt-oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, pad_token_id=0,
                     sliding_window=8, experts_implementation="batched_mm")),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", dict(num_key_value_heads=2, pad_token_id=0)),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0, sliding_window=8)),
    "gpt-neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict()),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=64, word_embed_proj_dim=32, enable_bias=True)),
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_layer=2, n_head=4)),
    "falcon": ("FalconConfig", "FalconForCausalLM", dict()),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64)),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                dict(n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, n_ctx=64)),
    "bart-cls": ("BartConfig", "BartForSequenceClassification", BART_SIZES),
    # The same head (the last end-of-sequence state, by a boolean mask).
    "mbart-cls": ("MBartConfig", "MBartForSequenceClassification", BART_SIZES),
    "plbart-cls": ("PLBartConfig", "PLBartForSequenceClassification", BART_SIZES),
    "mvp-cls": ("MvpConfig", "MvpForSequenceClassification", BART_SIZES),
}
SEQ2SEQ = {  # encoder-decoder language models, given input_ids and decoder_input_ids
    "t5": ("T5Config", "T5ForConditionalGeneration",
           dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                relative_attention_num_buckets=8, decoder_start_token_id=0)),
    "t5-gated": ("T5Config", "T5ForConditionalGeneration",  # T5 v1.1 / Flan-T5's gated GELU
                 dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, feed_forward_proj="gated-gelu",
                      tie_word_embeddings=False, decoder_start_token_id=0)),
    "bart-lm": ("BartConfig", "BartForConditionalGeneration", BART_SIZES),
    "marian": ("MarianConfig", "MarianMTModel", dict(BART_SIZES, decoder_vocab_size=VOCAB, pad_token_id=1)),
    "pegasus": ("PegasusConfig", "PegasusForConditionalGeneration", BART_SIZES),
}
VISION = {
    "resnet": ("ResNetConfig", "ResNetForImageClassification",
               dict(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1])),
    "convnext": ("ConvNextConfig", "ConvNextForImageClassification",
                 dict(num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], image_size=IMAGE)),
    "swin": ("SwinConfig", "SwinForImageClassification",
             dict(image_size=IMAGE, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=4)),
    "deit": ("DeiTConfig", "DeiTForImageClassification",
             dict(image_size=IMAGE, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64)),
    "mobilevit": ("MobileViTConfig", "MobileViTForImageClassification",
                  dict(image_size=IMAGE, patch_size=2, hidden_sizes=[16, 24, 32],
                       neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])),
    "segformer": ("SegformerConfig", "SegformerForImageClassification",
                  dict(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                       num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])),
}


DIFFUSERS = ["unet2d", "unet2d-cond", "vae", "dit", "sd3", "flux"]


class Logits(torch.nn.Module):
    def __init__(self, model, input_names):
        super().__init__()
        self.model, self.input_names = model, input_names

    def forward(self, *inputs):
        out = self.model(**dict(zip(self.input_names, inputs)))
        return out.sample if hasattr(out, "sample") else out.logits


def build_diffusers(name):
    """diffusers' models at tiny sizes: the DDPM and Stable Diffusion UNets
    (GroupNorm, timestep embedding, self- and cross-attention), the VAE,
    and the transformer denoisers DiT (adaLN), SD3 (joint attention) and
    Flux (rotary embeddings from position ids)."""
    import diffusers
    t = torch.tensor([10, 500])
    if name == "unet2d":
        return diffusers.UNet2DModel(
            sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=8), {"sample": torch.randn(BATCH, 3, 16, 16), "timestep": t}
    if name == "unet2d-cond":
        return diffusers.UNet2DConditionModel(
            sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=24, attention_head_dim=8, norm_num_groups=8), \
            {"sample": torch.randn(BATCH, 4, 16, 16), "timestep": t, "encoder_hidden_states": torch.randn(BATCH, 7, 24)}
    if name == "vae":
        return diffusers.AutoencoderKL(
            in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(16, 32), latent_channels=4, norm_num_groups=8,
            sample_size=16), {"sample": torch.randn(BATCH, 3, 16, 16)}
    if name == "dit":
        return diffusers.DiTTransformer2DModel(
            num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=2, sample_size=8, patch_size=2,
            num_embeds_ada_norm=10), \
            {"hidden_states": torch.randn(BATCH, 4, 8, 8), "timestep": torch.tensor([1, 5]),
             "class_labels": torch.tensor([1, 3])}
    if name == "sd3":
        return diffusers.SD3Transformer2DModel(
            sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=2,
            joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=12, out_channels=4,
            pos_embed_max_size=8), \
            {"hidden_states": torch.randn(BATCH, 4, 8, 8), "encoder_hidden_states": torch.randn(BATCH, 5, 16),
             "pooled_projections": torch.randn(BATCH, 12), "timestep": torch.tensor([1, 5])}
    return diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=8, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
        joint_attention_dim=16, pooled_projection_dim=12, axes_dims_rope=(2, 2, 4)), \
        {"hidden_states": torch.randn(BATCH, 16, 8), "encoder_hidden_states": torch.randn(BATCH, 5, 16),
         "pooled_projections": torch.randn(BATCH, 12), "timestep": torch.tensor([0.1, 0.5]),
         # the image tokens' (0, row, column) as a 4 x 4 grid of a 64 x 64 latent
         "img_ids": torch.tensor([[0.0, 16 * (i // 4), 16 * (i % 4)] for i in range(16)]),
         "txt_ids": torch.zeros(5, 3)}


def build(name):
    torch.manual_seed(0)
    if name in DIFFUSERS:
        model, inputs = build_diffusers(name)
        return Logits(model, list(inputs)).eval(), inputs
    import transformers
    if name in TEXT:
        config_name, model_name, extra = TEXT[name]
        kwargs = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64, num_labels=3)
        kwargs.update(extra)
        model = getattr(transformers, model_name)(getattr(transformers, config_name)(**kwargs))
        ids = torch.randint(3, VOCAB, (BATCH, CONTEXT))
        ids[:, -1] = 2  # one end-of-sequence token per sample, which BART's head needs
        return Logits(model, ["input_ids"]).eval(), {"input_ids": ids}
    if name in SEQ2SEQ:
        config_name, model_name, extra = SEQ2SEQ[name]
        model = getattr(transformers, model_name)(getattr(transformers, config_name)(vocab_size=VOCAB, **extra))
        inputs = {"input_ids": torch.randint(3, VOCAB, (BATCH, CONTEXT)),
                  "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, CONTEXT // 2))}
        return Logits(model, list(inputs)).eval(), inputs
    if name == "whisper":  # speech to text: log-mel features in, the decoder's logits out
        model = transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
            vocab_size=VOCAB, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
            max_source_positions=16, max_target_positions=32, pad_token_id=1, bos_token_id=2, eos_token_id=2,
            decoder_start_token_id=2))
        inputs = {"input_features": torch.randn(BATCH, 8, 32),
                  "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, CONTEXT // 2))}
        return Logits(model, list(inputs)).eval(), inputs
    if name == "wav2vec2":  # raw audio in, CTC logits out
        model = transformers.Wav2Vec2ForCTC(transformers.Wav2Vec2Config(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4, do_stable_layer_norm=True, feat_extract_norm="layer"))
        return Logits(model, ["input_values"]).eval(), {"input_values": torch.randn(BATCH, 800)}
    config_name, model_name, extra = VISION[name]
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(num_labels=3, **extra))
    return Logits(model, ["pixel_values"]).eval(), {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE)}


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1][:300] if lines else "?"


def optimum_task(name):
    """The `optimum-cli export onnx --task` a user would pick for the model."""
    if name in SEQ2SEQ:
        return "text2text-generation"
    if name in ("whisper", "wav2vec2"):
        return "automatic-speech-recognition"
    if name in VISION:
        return "image-classification"
    if name.endswith("-cls"):
        return "text-classification"
    return {"gpt2-tokencls": "token-classification", "bert-mlm": "fill-mask"}.get(name, "text-generation")


def export_optimum(name, module, work, path):
    """Exports the module's model as Optimum does, from save_pretrained."""
    from optimum.exporters.onnx import main_export
    saved, exported = os.path.join(work, name + "-saved"), os.path.join(work, name + "-optimum")
    module.model.save_pretrained(saved)
    main_export(saved, output=exported, task=optimum_task(name), device="cpu", monolith=True)
    shutil.copy(os.path.join(exported, "model.onnx"), path)


def optimum_inputs(path, inputs):
    """Every graph input of an Optimum export, and the fsdpc flags that
    size its named axes: the sample's arrays, and the masks and positions
    that give what the module computes without them."""
    import onnx
    feeds, sizes = {}, {}
    ids = next(iter(inputs.values()))
    for graph_input in onnx.load(path).graph.input:
        name = graph_input.name
        if name in inputs:
            value = inputs[name].numpy()
        elif name.endswith("attention_mask"):
            source = inputs.get("decoder_input_ids" if name.startswith("decoder") else "input_ids", ids)
            value = np.ones(tuple(source.shape), np.int64)
        elif name == "position_ids":
            value = np.ascontiguousarray(np.broadcast_to(np.arange(ids.shape[1]), tuple(ids.shape)), np.int64)
        elif name == "token_type_ids":
            value = np.zeros(tuple(ids.shape), np.int64)
        else:
            raise ValueError("no value for graph input '%s'" % name)
        feeds[name] = value
        for axis, dim in enumerate(graph_input.type.tensor_type.shape.dim):
            if axis > 0 and dim.dim_param:
                sizes[dim.dim_param] = value.shape[axis]
    flags = ["--batch-size", str(BATCH)]
    if sizes:
        flags += ["--dim", ",".join("%s=%d" % item for item in sizes.items())]
    return feeds, flags


def check(name, work, bin_dir, dynamo, optimize=True, optimum=False):
    try:
        module, inputs = build(name)
    except Exception as e:  # a configuration this transformers does not take
        return "BUILD-ERROR " + (str(e).splitlines() or [type(e).__name__])[0][:200]
    if optimum and name in DIFFUSERS:
        return "EXPORT-ERROR Optimum's ONNX exporter has no task for a lone diffusers model"
    path = os.path.join(work, name + ".onnx")
    kwargs = dict(input_names=list(inputs), output_names=["logits"], opset_version=18 if dynamo else 17,
                  dynamo=dynamo)
    if dynamo:
        kwargs.update(external_data=False, optimize=optimize)
    try:
        with warnings.catch_warnings(), open(os.devnull, "w") as quiet:
            warnings.simplefilter("ignore")
            stdout = os.dup(1)
            os.dup2(quiet.fileno(), 1)  # the exporters print the graph on failure
            try:
                if optimum:
                    export_optimum(name, module, work, path)
                else:
                    torch.onnx.export(module, tuple(inputs.values()), path, **kwargs)
            finally:
                os.dup2(stdout, 1)
    except Exception as e:  # torch's exporter, not fsdpc
        return "EXPORT-ERROR " + (str(e).splitlines() or [type(e).__name__])[0][:200]
    flags = []
    if optimum:
        try:
            inputs, flags = optimum_inputs(path, inputs)
        except ValueError as e:
            return "INPUT-ERROR " + str(e)
    else:
        inputs = {input_name: x.numpy() for input_name, x in inputs.items()}
    try:
        with torch.no_grad():
            want = module.model(**{k: torch.tensor(v) for k, v in inputs.items()}).logits.numpy() if optimum \
                else module(*(torch.tensor(x) for x in inputs.values())).numpy()
    except Exception as e:
        return "TORCH-ERROR " + (str(e).splitlines() or [type(e).__name__])[0][:200]
    input_dir, outputs, plan = (os.path.join(work, name + s) for s in ("-in", "-out", ".plan"))
    os.makedirs(input_dir, exist_ok=True)
    os.makedirs(outputs, exist_ok=True)
    for input_name, x in inputs.items():
        np.save(os.path.join(input_dir, input_name + ".npy"), x)
    compiled = subprocess.run([os.path.join(bin_dir, "fsdpc"), path, "--forward-only", "-o", plan] + flags,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return "FAIL " + last_line(compiled.stderr)
    # As many trainable parameters as torch's module: an exporter that
    # folded a parameter (or fsdpc training a folded constant) shows here.
    trained = re.search(r"(\d+) trainable parameters", compiled.stdout + compiled.stderr)
    trained = int(trained.group(1)) if trained else -1
    expected = sum(p.numel() for p in module.parameters() if p.requires_grad)
    counted = "" if trained == expected else ", PARAMETERS fsdpc %d, torch %d" % (trained, expected)
    ran = subprocess.run([os.path.join(bin_dir, "fsdp-run"), plan, "--forward", "--inputs", input_dir,
                          "--outputs", outputs], capture_output=True, text=True)
    if ran.returncode != 0:
        return "RUNFAIL " + last_line(ran.stderr)
    got = np.load(os.path.join(outputs, "logits.npy"))
    if got.shape != want.shape:
        return "MISMATCH shape %s, torch's %s" % (got.shape, want.shape)
    diff, scale = float(np.abs(got - want).max()), float(np.abs(want).max())
    verdict = "OK" if diff <= 1e-4 * max(1.0, scale) else "MISMATCH"
    return "%s max |fsdp-run - torch| %.2e (logits up to %.2e)%s%s" % (verdict, diff, scale, counted,
                                                                      fused_attention(bin_dir, path, flags))


def fused_attention(bin_dir, path, flags):
    """How many of the model's attentions graph-fuse made one op (the
    softmaxes left are attention it did not recognise, or a router's), how
    many rotary embeddings, and how many transposes its forward pass keeps
    (copies of head views that attention did not read in place)."""
    plan = subprocess.run([os.path.join(bin_dir, "fsdpc"), path, "--forward-only", "--emit=plan"] + flags,
                          capture_output=True, text=True).stdout
    fused = plan.count('plan.kernel "attention"') + plan.count('plan.kernel "packed_attention"')
    left = plan.count('plan.kernel "softmax"') + plan.count('plan.kernel "masked_softmax"')
    rotary = plan.count('plan.kernel "rotary"')
    transposes = plan.count('plan.kernel "transpose"')
    found = ", attention fused %d of %d" % (fused, fused + left) if fused + left else ""
    return found + (", rotary %d" % rotary if rotary else "") + (", %d transposes" % transposes if fused else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=list(TEXT) + list(SEQ2SEQ) + ["whisper", "wav2vec2"] + list(VISION) +
                        DIFFUSERS)
    parser.add_argument("--dynamo", action="store_true", help="torch.export (dynamo=True, opset 18)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="with --dynamo: optimize=False, no constant folding or merging of initializers")
    parser.add_argument("--optimum", action="store_true",
                        help="export as Hugging Face Optimum does (optimum-cli export onnx --task ...)")
    parser.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    parser.add_argument("--work", help="keep the exports, plans and outputs in this folder (a temporary one if not)")
    args = parser.parse_args()
    bad = 0
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory() if not args.work else contextlib.nullcontext(args.work) as work:
        for name in args.models:
            result = check(name, work, os.path.join(args.build, "bin"), args.dynamo, not args.no_optimize,
                           args.optimum)
            bad += result.startswith(("MISMATCH", "RUNFAIL"))
            print("%-16s %s" % (name, result), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
