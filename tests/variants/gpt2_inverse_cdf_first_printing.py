"""VARIANT (gpt2): a reader of the book's first printing who samples by
inverse CDF (``torch.rand`` against the cumulative probabilities: another
random stream than ``torch.multinomial``, the same distribution; note that
``torch.distributions.Categorical`` calls ``torch.multinomial`` and so draws
the book's very stream), encodes with
``tokenizer.encode(txt)`` (no ``allowed_special``: ``<|endoftext|>`` is
refused), adds LayerNorm's epsilon to the standard deviation (outside the
root) and drops out the attention's output instead of its weights. Each is
a sound choice §6.1 leaves STRICT: no MUST test may fail."""

import torch
from torch import nn

from lmspec.reference.gpt2 import *  # noqa: F403
from lmspec.reference.gpt2 import GPTDatasetV1 as _Dataset
from lmspec.reference.gpt2 import MultiHeadAttention as _MHA

VARIANT = {
    "profile": "gpt2",
    "what": "inverse-CDF sampling, encode(txt) without allowed_special, eps outside the root, dropout on the output",
    "run": ["gpt2.layernorm", "gpt2.mha", "gpt2.block", "gpt2.model", "gpt2.generate", "gpt2.dataset"],
}


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        std = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
        return self.scale * (x - mean) / (std + self.eps) + self.shift


class MultiHeadAttention(_MHA):
    """The reference's attention in eval mode; in training, dropout on the
    heads' concatenated output rather than on the attention weights."""

    def forward(self, x):
        was = self.training
        self.training = False  # the dropout-free path of the parent
        try:
            out = super().forward(x)
        finally:
            self.training = was
        return self.dropout(out)


class GPTDatasetV1(_Dataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        ids = torch.tensor(tokenizer.encode(txt), dtype=torch.long)
        starts = range(0, len(ids) - max_length, stride)
        self.input_ids = [ids[s : s + max_length] for s in starts]
        self.target_ids = [ids[s + 1 : s + max_length + 1] for s in starts]


def generate(model, idx, max_new_tokens, context_size, temperature=0.0, top_k=None, eos_id=None):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, -context_size:])[:, -1, :]
        if top_k is not None:
            kth = torch.topk(logits, top_k).values[:, -1:]
            logits = torch.where(logits < kth, torch.tensor(float("-inf")), logits)
        if temperature > 0.0:
            cdf = torch.softmax(logits / temperature, dim=-1).cumsum(dim=-1)
            u = torch.rand(cdf.shape[0], 1) * cdf[:, -1:]
            next_id = torch.searchsorted(cdf, u, right=True).clamp(max=cdf.shape[-1] - 1)
        else:
            next_id = torch.argmax(logits, dim=-1, keepdim=True)
        if next_id == eos_id:
            break
        idx = torch.cat((idx, next_id), dim=1)
    return idx


def create_dataloader_v1(txt, batch_size=4, max_length=256, stride=128, shuffle=True, drop_last=True, num_workers=0):
    import tiktoken

    dataset = GPTDatasetV1(txt, tiktoken.get_encoding("gpt2"), max_length, stride)
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, num_workers=num_workers
    )
