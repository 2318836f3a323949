"""Minimal standalone HF model for 'nemotron-nas' (DeciLM) block_configs, for this trial only.
Weight names follow public checkpoints: self_attn.{q,k,v,o}_proj, self_attn.linear_attn, mlp.{gate,up,down}_proj,
mlp.linear_mlp; no input_layernorm for no-op attention, no post_attention_layernorm for no-op ffn."""
import copy, json, os
import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding


def ffn_size(mult, hidden):
    n = int(2 * mult * hidden / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


class NasConfig(LlamaConfig):
    model_type = "nemotron-nas"

    def __init__(self, block_configs=None, **kw):
        super().__init__(**kw)
        # like DeciLM's configuration_decilm.py: attribute access (NeMo's importer reads block_configs[0].attention.n_heads_in_group)
        self.block_configs = [Block(b) if isinstance(b, dict) else b for b in (block_configs or [])]

    def to_dict(self):
        out = super().to_dict()
        out["block_configs"] = [b.to_dict() if isinstance(b, Block) else b for b in self.block_configs]
        return out


class _NS(dict):
    __getattr__ = dict.get


class Block:
    def __init__(self, d):
        self.attention, self.ffn = _NS(d["attention"]), _NS(d["ffn"])

    def to_dict(self):
        return {"attention": dict(self.attention), "ffn": dict(self.ffn)}


class LinAttn(nn.Module):
    def __init__(self, h):
        super().__init__(); self.linear_attn = nn.Linear(h, h, bias=False)
    def forward(self, hidden_states, **kw):
        return self.linear_attn(hidden_states), None


class LinMLP(nn.Module):
    def __init__(self, h):
        super().__init__(); self.linear_mlp = nn.Linear(h, h, bias=False)
    def forward(self, x):
        return self.linear_mlp(x)


class Layer(nn.Module):
    def __init__(self, cfg, i):
        super().__init__()
        b = cfg.block_configs[i]; a, f = b.attention, b.ffn
        lc = copy.copy(cfg)
        self.a_noop, self.f_noop = a.get("no_op", False), f.get("no_op", False)
        if not self.a_noop:
            self.input_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            if a.get("replace_with_linear", False):
                self.self_attn = LinAttn(cfg.hidden_size)
            else:
                lc.num_key_value_heads = cfg.num_attention_heads // a["n_heads_in_group"]
                self.self_attn = LlamaAttention(lc, i)
        if not self.f_noop:
            self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            if f.get("replace_with_linear", False):
                self.mlp = LinMLP(cfg.hidden_size)
            else:
                lc2 = copy.copy(cfg); lc2.intermediate_size = ffn_size(f["ffn_mult"], cfg.hidden_size)
                self.mlp = LlamaMLP(lc2)

    def forward(self, h, **kw):
        if not self.a_noop:
            h = h + self.self_attn(hidden_states=self.input_layernorm(h), **kw)[0]
        if not self.f_noop:
            h = h + self.mlp(self.post_attention_layernorm(h))
        return h


class NasInner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([Layer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = LlamaRMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=cfg)


class DeciLMForCausalLM(PreTrainedModel):
    config_class = NasConfig
    base_model_prefix = "model"
    _supports_sdpa = True

    def __init__(self, cfg):
        super().__init__(cfg)
        self.model = NasInner(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids=None, **kw):
        h = self.model.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        pe = self.model.rotary_emb(h, position_ids=pos)
        for layer in self.model.layers:
            h = layer(h, attention_mask=None, position_embeddings=pe)
        return CausalLMOutputWithPast(logits=self.lm_head(self.model.norm(h)))


AutoConfig.register("nemotron-nas", NasConfig, exist_ok=True)
AutoModelForCausalLM.register(NasConfig, DeciLMForCausalLM, exist_ok=True)


def make_tokenizer(path, vocab=256):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    v = {"<s>": 0, "</s>": 1, "<unk>": 2}
    v.update({f"t{i}": i for i in range(3, vocab)})
    tk = Tokenizer(models.WordLevel(v, unk_token="<unk>")); tk.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>").save_pretrained(path)


BLOCKS_OK = [
    {"attention": {"n_heads_in_group": 2, "no_op": False, "replace_with_linear": False}, "ffn": {"ffn_mult": 2.0, "no_op": False, "replace_with_linear": False}},
    {"attention": {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False}, "ffn": {"ffn_mult": 7.5, "no_op": False, "replace_with_linear": False}},
    {"attention": {"n_heads_in_group": None, "no_op": False, "replace_with_linear": True}, "ffn": {"ffn_mult": None, "no_op": True, "replace_with_linear": False}},
    {"attention": {"n_heads_in_group": 2, "no_op": False, "replace_with_linear": False}, "ffn": {"ffn_mult": None, "no_op": False, "replace_with_linear": True}},
]


def make_checkpoint(path, blocks=BLOCKS_OK, seed=0):
    torch.manual_seed(seed)
    cfg = NasConfig(block_configs=blocks, vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=256, num_hidden_layers=len(blocks), max_position_embeddings=512, rms_norm_eps=1e-5,
                    rope_theta=500000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1,
                    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 8192},
                    architectures=["DeciLMForCausalLM"], torch_dtype="float32")
    cfg._attn_implementation = "sdpa"
    m = DeciLMForCausalLM(cfg).eval()
    with torch.no_grad():  # non-trivial norms so a missed mapping shows
        for n, p in m.named_parameters():
            if "norm" in n:
                p.copy_(1.0 + 0.5 * torch.randn_like(p))
    m.save_pretrained(path)
    make_tokenizer(path)
    return m
