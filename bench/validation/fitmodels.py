"""The models of the batch-fit checks, built from code on random data (no downloads).

resnet18 and resnet50 in fp32 with SGD; vit_b_16 with bf16 autocast and AdamW;
gpt2 (GPT-2 small: 12 layers of 768, 512 tokens, vocabulary 50 257) and lm_long
(the same layers with 1 024 tokens and a vocabulary of 128 256, whose logits are
most of its memory) with bf16 autocast and AdamW.

Three more, kept out of the allowance's derivation to check it on shapes it
was not built from: lm_wide (a Llama-style model, 8 layers of 1 024, 1 024
tokens, a vocabulary of 256 000), bert (BERT-base masked LM, 512 tokens) and
convnext_tiny, each with bf16 autocast and AdamW.

Two more, added after the rule for the allocator near the limit was set,
to check it on shapes it had not seen: t5 (T5-base: an encoder-decoder of
12 + 12 layers of 768, 512 tokens in and 128 out, vocabulary 32 128) with
bf16 autocast and AdamW, and deeplab (DeepLabV3 with a ResNet-50 backbone,
21 classes, 512×512 images, a dense per-pixel loss) in fp32 with SGD.

Three more, added after the rule of two bounds (two largest segments, 18 % of
the peak) was set, to check it on shapes it had not seen: efficientnet_b0
(depthwise convolutions, many small activations) in fp32 with SGD, swin_t
(shifted-window attention) with bf16 autocast and AdamW, and lm_1b (a
Llama-style model of 1.1 billion parameters: 16 layers of 2 048, grouped-query
attention with 4 key-value heads, 2 048 tokens, vocabulary 32 000, so that
weights and AdamW's state are a large fixed part) with bf16 autocast and AdamW.

Four more, added after this version's rule was set, to check it on shapes it
had not seen: resnet34 (the stem of ResNet-18 with twice its blocks), vgg11
(no residuals, its largest activations at full resolution, a 100 MiB
classifier) and densenet121 (every layer's output concatenated: activations of
many different sizes), in fp32 with SGD; and gpt2_medium (24 layers of 1 024,
2 048 tokens, vocabulary 50 257) with bf16 autocast and AdamW. vgg11 set the
rule's least of one largest segment; densenet121, gpt2_medium and vgg16 (two
convolutions at full resolution where vgg11 has one) were recorded after it.

Two more, added after the allocator replay was written, to check it on shapes
it had not seen: mobilenet_v3_large (inverted residuals, hard-swish, many
small activations) in fp32 with SGD, and qwen_05b (a Qwen2-style model of
0.5 billion parameters: 24 layers of 896, grouped-query attention with 2
key-value heads, 1 024 tokens, a vocabulary of 151 936 with tied embeddings)
with bf16 autocast and AdamW. And two more after the replay's edge was made
to hold for every value below it: regnet_y_3_2gf (grouped convolutions,
squeeze-and-excitation) in fp32 with SGD, and gpt2_ckpt (GPT-2 small with
1 024 tokens and activation checkpointing: each block's forward runs again
in the backward pass) with bf16 autocast and AdamW. And two after the
pessimistic end held a request sized for the shape: efficientnet_v2_s
(fused inverted residuals) in fp32 with SGD, and lm_4k (a Llama-style
model, 8 layers of 1 024, 4 096 tokens, vocabulary 32 000) with bf16
autocast and AdamW. And two after the replay's failure checks and compressed
traces: resnext50_32x4d (grouped convolutions of 32 groups in a ResNet-50
layout) in fp32 with SGD, and opt_2k (an OPT-style decoder: 16 layers of
1 024, learned positions, 2 048 tokens, vocabulary 50 272, ReLU feed-forward
of 4 096) with fp16 autocast, a GradScaler and AdamW. And gpt2_seq, whose
value is the sequence length, not the batch (GPT-2 small, 8 sequences a step,
eager attention, whose scores grow with the square of the length), for
compare --by seq_len and memrec fit --by seq_len (fit_holdout.sh with
TAG=seq_len MODELS="gpt2_seq:64:256,512,1024").
"""
import torch
import torch.nn as nn

MODELS = ("resnet18", "resnet50", "vit_b_16", "gpt2", "lm_long", "lm_wide", "bert", "convnext_tiny", "t5", "deeplab",
          "efficientnet_b0", "swin_t", "lm_1b", "resnet34", "vgg11", "densenet121", "gpt2_medium", "vgg16",
          "mobilenet_v3_large", "qwen_05b", "regnet_y_3_2gf", "gpt2_ckpt",
          "efficientnet_v2_s", "lm_4k", "resnext50_32x4d", "opt_2k", "gpt2_seq")


def lm_loss(net, ids):
    """A language model's loss on its own tokens."""
    return net(input_ids=ids, labels=ids).loss


def build(name):
    """Returns (net on the CPU, make_opt(params), autocast dtype or None,
    make_batch(b, device) -> tuple of tensors, loss(net, *batch))."""
    if name in ("resnet18", "resnet50", "vit_b_16", "convnext_tiny", "efficientnet_b0", "swin_t", "resnet34", "vgg11",
                "densenet121", "vgg16", "mobilenet_v3_large", "regnet_y_3_2gf", "efficientnet_v2_s",
                "resnext50_32x4d"):
        import torchvision
        net = getattr(torchvision.models, name)(num_classes=1000)
        lossf = nn.CrossEntropyLoss()
        if name in ("vit_b_16", "convnext_tiny", "swin_t"):
            make_opt, amp = (lambda p: torch.optim.AdamW(p, lr=1e-4)), torch.bfloat16
        else:
            make_opt, amp = (lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)), None

        def make_batch(b, dev):
            return torch.randn(b, 3, 224, 224, device=dev), torch.randint(0, 1000, (b,), device=dev)

        def loss(net, x, y):
            return lossf(net(x), y)
        return net, make_opt, amp, make_batch, loss
    if name == "deeplab":
        import torchvision
        net = torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21)
        lossf = nn.CrossEntropyLoss()

        def make_batch(b, dev):
            return torch.randn(b, 3, 512, 512, device=dev), torch.randint(0, 21, (b, 512, 512), device=dev)

        def loss(net, x, y):
            return lossf(net(x)["out"], y)
        return net, (lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)), None, make_batch, loss
    if name == "t5":
        import transformers as tf
        cfg = tf.T5Config(vocab_size=32128, d_model=768, d_ff=3072, num_layers=12, num_decoder_layers=12, num_heads=12)
        cfg.decoder_start_token_id, cfg.pad_token_id = 0, 0  # the labels shifted right start with it
        net = tf.T5ForConditionalGeneration(cfg)

        def make_batch(b, dev):
            return torch.randint(0, 32128, (b, 512), device=dev), torch.randint(0, 32128, (b, 128), device=dev)

        def loss(net, ids, labels):
            return net(input_ids=ids, labels=labels).loss
        return net, (lambda p: torch.optim.AdamW(p, lr=1e-4)), torch.bfloat16, make_batch, loss
    if name not in MODELS:
        raise SystemExit("unknown model %r (want one of %s)" % (name, ", ".join(MODELS)))
    if name in ("lm_wide", "bert", "lm_1b", "qwen_05b", "lm_4k", "opt_2k"):
        import transformers as tf
        if name == "lm_4k":
            seq, vocab = 4096, 32000
            net = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=vocab, hidden_size=1024, intermediate_size=2816,
                                                     num_hidden_layers=8, num_attention_heads=16,
                                                     max_position_embeddings=seq))
        elif name == "qwen_05b":
            seq, vocab = 1024, 151936
            net = tf.Qwen2ForCausalLM(tf.Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864,
                                                     num_hidden_layers=24, num_attention_heads=14,
                                                     num_key_value_heads=2, max_position_embeddings=seq,
                                                     tie_word_embeddings=True))
        elif name == "lm_1b":
            seq, vocab = 2048, 32000
            net = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=vocab, hidden_size=2048, intermediate_size=5632,
                                                     num_hidden_layers=16, num_attention_heads=16,
                                                     num_key_value_heads=4, max_position_embeddings=seq))
        elif name == "opt_2k":
            seq, vocab = 2048, 50272
            net = tf.OPTForCausalLM(tf.OPTConfig(vocab_size=vocab, hidden_size=1024, num_hidden_layers=16, ffn_dim=4096,
                                                 num_attention_heads=16, max_position_embeddings=seq,
                                                 word_embed_proj_dim=1024))
        elif name == "lm_wide":
            seq, vocab = 1024, 256000
            net = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=vocab, hidden_size=1024, intermediate_size=2816,
                                                     num_hidden_layers=8, num_attention_heads=16,
                                                     max_position_embeddings=seq))
        else:
            seq, vocab = 512, 30522
            net = tf.BertForMaskedLM(tf.BertConfig(vocab_size=vocab, max_position_embeddings=seq))

        def make_batch(b, dev):
            return (torch.randint(0, vocab, (b, seq), device=dev),)
        amp = torch.float16 if name == "opt_2k" else torch.bfloat16  # fp16: fitjob.py scales its loss
        return net, (lambda p: torch.optim.AdamW(p, lr=1e-4)), amp, make_batch, lm_loss
    if name == "gpt2_seq":
        # The value is the sequence length (fitjob.py's --batch), 8 sequences
        # a step, eager attention: its scores grow with the square of it.
        from transformers import GPT2Config, GPT2LMHeadModel
        net = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=32768, vocab_size=50257,
                                         attn_implementation="eager"))

        def make_batch(s, dev):
            return (torch.randint(0, 50257, (8, s), device=dev),)
        return net, (lambda p: torch.optim.AdamW(p, lr=1e-4)), torch.bfloat16, make_batch, lm_loss
    from transformers import GPT2Config, GPT2LMHeadModel
    seq, vocab = {"gpt2": (512, 50257), "gpt2_medium": (2048, 50257), "gpt2_ckpt": (1024, 50257)}.get(name, (1024, 128256))
    wide = name == "gpt2_medium"
    net = GPT2LMHeadModel(GPT2Config(n_layer=24 if wide else 12, n_embd=1024 if wide else 768, n_head=16 if wide else 12,
                                     n_positions=seq, vocab_size=vocab))
    if name == "gpt2_ckpt":
        net.gradient_checkpointing_enable()

    def make_batch(b, dev):
        return (torch.randint(0, vocab, (b, seq), device=dev),)
    return net, (lambda p: torch.optim.AdamW(p, lr=1e-4)), torch.bfloat16, make_batch, lm_loss
