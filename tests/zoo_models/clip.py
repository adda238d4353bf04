"""ViT and CLIP as MegEngine's multimodal zoo writes them (official/multimodal/clip/
{models,functional}.py): patch-embedding conv, class token and positional embedding,
pre-norm residual attention blocks with QuickGELU and CLIP's own packed-projection
multi-head attention (sequence-first layout), a causal mask for the text tower, the
end-of-text token picked by advanced indexing, cosine-similarity logits. Widths, depths and
the context length scale it down."""
from collections import OrderedDict

import numpy as np

import megtrace as mge
import megtrace.functional as F
import megtrace.module as M
from megtrace.functional import matmul


def multi_head_attention(query, head_dim, num_heads, in_proj_weight, in_proj_bias,
                         attn_output_weight, attn_output_bias, attn_mask=None):
    """The packed-projection, self-attention path of clip/functional.py."""
    tgt_len = query.shape[0]
    bsz = query.shape[1]
    query, key, value = F.split(F.nn.linear(query, in_proj_weight, in_proj_bias), 3, axis=-1)
    query = query.reshape(-1, bsz * num_heads, head_dim).transpose(1, 0, 2)
    key = key.reshape(-1, bsz * num_heads, head_dim).transpose(1, 0, 2)
    value = value.reshape(-1, bsz * num_heads, head_dim).transpose(1, 0, 2)
    src_len = key.shape[1]
    attn_output_weights = matmul(query, key.transpose(0, 2, 1)) / (head_dim ** 0.5)
    if attn_mask is not None:
        attn_output_weights = attn_output_weights + attn_mask
    attn_output_weights = attn_output_weights.reshape(bsz * num_heads, tgt_len, src_len)
    attn_output_weights = F.softmax(attn_output_weights, axis=-1)
    attn_output = matmul(attn_output_weights, value)
    attn_output = attn_output.transpose(1, 0, 2).reshape(tgt_len, bsz, num_heads * head_dim)
    return F.nn.linear(attn_output, attn_output_weight, attn_output_bias), None


class MultiheadAttention(M.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise ValueError(f"embed_dim({embed_dim}) must be divisible by num_heads({num_heads})")
        self.in_proj = M.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = M.Linear(embed_dim, embed_dim, bias=bias)
        M.init.xavier_uniform_(self.in_proj.weight)
        M.init.zeros_(self.in_proj.bias)
        M.init.zeros_(self.out_proj.bias)

    def forward(self, q, attn_mask=None):
        return multi_head_attention(q, self.head_dim, self.num_heads, self.in_proj.weight,
                                    self.in_proj.bias, self.out_proj.weight,
                                    self.out_proj.bias, attn_mask=attn_mask)


class QuickGELU(M.Module):
    def forward(self, x):
        return x * F.sigmoid(1.702 * x)


class LayerNorm(M.LayerNorm):
    """To handle fp16."""

    def forward(self, x):
        orig_type = x.dtype
        ret = super().forward(x.astype(np.float32))
        return ret.astype(orig_type)


class ResidualAttentionBlock(M.Module):
    def __init__(self, d_model, n_head, attn_mask=None):
        super().__init__()
        self.attn = MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = M.Sequential(OrderedDict([
            ("c_fc", M.Linear(d_model, d_model * 4)),
            ("gelu", QuickGELU()),
            ("c_proj", M.Linear(d_model * 4, d_model))]))
        self.ln_2 = LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x):
        attn_mask = None
        if self.attn_mask is not None:
            attn_mask = mge.tensor(self.attn_mask, dtype=x.dtype, device=x.device)
        return self.attn(x, attn_mask=attn_mask)[0]

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class Transformer(M.Module):
    def __init__(self, width, layers, heads, attn_mask=None):
        super().__init__()
        self.width = width
        self.layers = layers
        self.resblocks = M.Sequential(
            *[ResidualAttentionBlock(width, heads, attn_mask) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class VisionTransformer(M.Module):
    def __init__(self, input_resolution=32, patch_size=8, width=32, layers=2, heads=4,
                 output_dim=16):
        super().__init__()
        self.input_resolution = input_resolution
        self.output_dim = output_dim
        self.conv1 = M.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size,
                              stride=patch_size, bias=False)
        scale = width ** -0.5
        self.class_embedding = mge.Parameter(scale * mge.random.normal(size=(width,)))
        self.positional_embedding = mge.Parameter(scale * mge.random.normal(
            size=((input_resolution // patch_size) ** 2 + 1, width)))
        self.ln_pre = LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = LayerNorm(width)
        self.proj = mge.Parameter(scale * mge.random.normal(size=(width, output_dim)))

    def forward(self, x):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        x = x.transpose(0, 2, 1)
        x = F.concat([self.class_embedding.astype(x.dtype) + F.zeros(
            (x.shape[0], 1, x.shape[-1]), dtype=x.dtype, device=x.device), x], axis=1)
        x = x + self.positional_embedding.astype(x.dtype)
        x = self.ln_pre(x)
        x = x.transpose(1, 0, 2)
        x = self.transformer(x)
        x = x.transpose(1, 0, 2)
        x = self.ln_post(x[:, 0, :])
        if self.proj is not None:
            x = matmul(x, self.proj.astype(x.dtype))
        return x


class CLIP(M.Module):
    def __init__(self, embed_dim=16, image_resolution=32, vision_layers=1, vision_width=32,
                 vision_patch_size=8, context_length=8, vocab_size=40, transformer_width=32,
                 transformer_heads=4, transformer_layers=1):
        super().__init__()
        self._context_length = context_length
        self.visual = VisionTransformer(image_resolution, vision_patch_size, vision_width,
                                        vision_layers, vision_width // 8, embed_dim)
        self.transformer = Transformer(transformer_width, transformer_layers,
                                       transformer_heads, self.build_attention_mask())
        self.vocab_size = vocab_size
        self.token_embedding = M.Embedding(vocab_size, transformer_width)
        self.positional_embedding = mge.Parameter(F.zeros((context_length, transformer_width)))
        self.ln_final = LayerNorm(transformer_width)
        self.text_projection = mge.Parameter(F.zeros((transformer_width, embed_dim)))
        self.logit_scale = mge.Parameter(F.ones([1]) * F.log(1 / 0.07))
        self.initialize_parameters()

    def initialize_parameters(self):
        M.init.normal_(self.token_embedding.weight, std=0.02)
        M.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (self.transformer.width ** -0.5) * ((2 * self.transformer.layers) ** -0.5)
        attn_std = self.transformer.width ** -0.5
        fc_std = (2 * self.transformer.width) ** -0.5
        for block in self.transformer.resblocks:
            M.init.normal_(block.attn.in_proj.weight, std=attn_std)
            M.init.normal_(block.attn.out_proj.weight, std=proj_std)
            M.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            M.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        M.init.normal_(self.text_projection, std=self.transformer.width ** -0.5)

    def build_attention_mask(self):
        mask = np.full([self._context_length, self._context_length], fill_value=float("-inf"))
        return np.triu(mask, k=1)

    @property
    def dtype(self):
        return self.visual.conv1.weight.dtype

    def encode_image(self, image):
        return self.visual(image.astype(self.dtype))

    def encode_text(self, text):
        x = self.token_embedding(text).astype(self.dtype)
        x = x + self.positional_embedding.astype(self.dtype)
        x = x.transpose(1, 0, 2)
        x = self.transformer(x)
        x = x.transpose(1, 0, 2)
        x = self.ln_final(x).astype(self.dtype)
        # features of the end-of-text token (the highest id of each sequence)
        return matmul(x[F.arange(x.shape[0], dtype=np.int32), F.argmax(text, axis=-1)],
                      self.text_projection)

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)
        image_features = image_features / F.norm(image_features, axis=1, keepdims=True)
        text_features = text_features / F.norm(text_features, axis=1, keepdims=True)
        logit_scale = F.exp(self.logit_scale)
        logits_per_image = matmul(logit_scale * image_features, text_features.transpose(1, 0))
        return logits_per_image, logits_per_image.transpose(1, 0)
