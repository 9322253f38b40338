"""lm-eval-harness's view of a Levanter model: log-likelihoods and greedy generations computed with jax.

Levanter ships an adapter (`levanter.eval_harness`), but it tokenizes prompt + completion with the
tokenizer's special tokens, so with marin's tokenizers (which add BOS and EOS to every text, as they
were trained) it scores the EOS as part of every completion and shifts the completion by one token.
This adapter follows lm-eval's own `TemplateLM` contract instead: lm-eval splits each request into
context and continuation tokens (no special tokens); here every request is scored as

    BOS + context + continuation        (left-truncated to the model's seq_len + 1 tokens)

which is how the model saw documents in training. The log-likelihood of a continuation is the sum of
log p(token | everything before it) over its tokens, and `is_greedy` says whether each of them is the
model's argmax. A batch is always `batch_size` rows of `seq_len` positions (one compilation), padded on
the right, which causal attention never looks at.

Generation is greedy (the harness' `do_sample: false`): one forward per new token over the whole window,
which is what tiny CPU models need; sampling is refused with an error naming the task.
"""

from __future__ import annotations

import logging

import numpy as np
from lm_eval.api.model import TemplateLM

logger = logging.getLogger(__name__)


def _score_fn(lev_config):
    """jit(model, tokens[B, P], targets[B, P]) -> (log p(target) [B, P], target is the argmax [B, P])."""
    import equinox as eqx
    import haliax as hax
    import jax
    import jax.numpy as jnp
    from levanter.layers.attention import AttentionMask

    @eqx.filter_jit
    def score(model, tokens, targets):
        Batch = hax.Axis("batch", tokens.shape[0])
        Pos = lev_config.Pos.resize(tokens.shape[1])
        logits = model(hax.named(tokens, (Batch, Pos)), attn_mask=AttentionMask.causal()).array
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
        return picked, jnp.argmax(logp, axis=-1) == targets

    return score


def _next_token_fn(lev_config):
    """jit(model, tokens[B, P], last[B]) -> the argmax token after position `last` of each row."""
    import equinox as eqx
    import haliax as hax
    import jax.numpy as jnp
    from levanter.layers.attention import AttentionMask

    @eqx.filter_jit
    def next_token(model, tokens, last):
        Batch = hax.Axis("batch", tokens.shape[0])
        Pos = lev_config.Pos.resize(tokens.shape[1])
        logits = model(hax.named(tokens, (Batch, Pos)), attn_mask=AttentionMask.causal()).array
        at = jnp.take_along_axis(logits.astype(jnp.float32), last[:, None, None], axis=1)[:, 0, :]
        return jnp.argmax(at, axis=-1)

    return next_token


class LevanterLM(TemplateLM):
    """A trained Levanter LM as an `lm_eval.api.model.LM`. Build and call it inside `device_mesh()`."""

    def __init__(self, model, lev_config, tokenizer, batch_size: int = 16):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.seq_len = lev_config.seq_len
        self._score = _score_fn(lev_config)
        self._next_token = _next_token_fn(lev_config)

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        return self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.eot_token_id

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "tokenizer")).replace("/", "__")

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        return self.tokenizer(string, add_special_tokens=False)["input_ids"]

    def _with_prefix(self, tokens: list[int]) -> list[int]:
        return tokens if tokens[:1] == [self.prefix_token_id] else [self.prefix_token_id, *tokens]

    def token_loglikelihoods(self, sequences: list[tuple[list[int], int]]) -> list[tuple[float, bool]]:
        """(sum of log p, all greedy) of the last `n` tokens of each token sequence (which starts with BOS)."""
        rows = []
        for tokens, n in sequences:
            tokens = tokens[-(self.seq_len + 1) :]
            if n > len(tokens) - 1:
                raise ValueError(f"a continuation of {n} tokens does not fit the model's {self.seq_len} positions")
            rows.append((tokens, n))
        out: list[tuple[float, bool]] = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            inputs = np.zeros((self.batch_size, self.seq_len), dtype=np.int32)
            targets = np.zeros((self.batch_size, self.seq_len), dtype=np.int32)
            for i, (tokens, _) in enumerate(chunk):
                inputs[i, : len(tokens) - 1] = tokens[:-1]
                targets[i, : len(tokens) - 1] = tokens[1:]
            logp, greedy = self._score(self.model, inputs, targets)
            logp, greedy = np.asarray(logp, dtype=np.float64), np.asarray(greedy)
            for i, (tokens, n) in enumerate(chunk):
                end = len(tokens) - 1
                out.append((float(logp[i, end - n : end].sum()), bool(greedy[i, end - n : end].all())))
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        sequences = []
        for _, context, continuation in requests:
            sequences.append((self._with_prefix([*context, *continuation]), len(continuation)))
        return self.token_loglikelihoods(sequences)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """log p(text) over every token of the text after BOS, in windows of seq_len overlapping by one."""
        from marin.evaluation.evaluate import windows

        out = []
        for request in requests:
            (text,) = request.args
            tokens = self._with_prefix(self.tok_encode(text))
            parts = [(chunk, len(chunk) - 1) for chunk in windows(tokens, self.seq_len + 1) if len(chunk) > 1]
            out.append(sum(ll for ll, _ in self.token_loglikelihoods(parts)))
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for start in range(0, len(requests), self.batch_size):
            out.extend(self._generate_batch(requests[start : start + self.batch_size]))
        return out

    def _generate_batch(self, requests) -> list[str]:
        prompts, stops, budgets = [], [], []
        for request in requests:
            context, kwargs = request.args
            kwargs = dict(kwargs or {})
            if kwargs.get("do_sample") or float(kwargs.get("temperature", 0.0) or 0.0) > 0:
                raise ValueError(
                    f"task {request.task_name!r} asks for sampling; marin's harness generates greedily only "
                    "(set generation_kwargs do_sample: false)"
                )
            until = kwargs.get("until") or []
            stops.append([until] if isinstance(until, str) else list(until))
            budgets.append(int(kwargs.get("max_gen_toks", 32)))
            prompts.append(self._with_prefix(self.tok_encode(context)))
        generated: list[list[int]] = [[] for _ in requests]
        done = [False] * len(requests)
        texts = [""] * len(requests)
        for _ in range(max(budgets)):
            live = [i for i in range(len(requests)) if not done[i]]
            if not live:
                break
            inputs = np.zeros((self.batch_size, self.seq_len), dtype=np.int32)
            last = np.zeros(self.batch_size, dtype=np.int32)
            for i in live:
                window = [*prompts[i], *generated[i]][-self.seq_len :]
                inputs[i, : len(window)] = window
                last[i] = len(window) - 1
            next_tokens = np.asarray(self._next_token(self.model, inputs, last))
            for i in live:
                token = int(next_tokens[i])
                if token == self.eot_token_id:
                    done[i] = True
                    continue
                generated[i].append(token)
                texts[i] = self.tokenizer.decode(generated[i], skip_special_tokens=True)
                if any(s and s in texts[i] for s in stops[i]) or len(generated[i]) >= budgets[i]:
                    done[i] = True
        results = []
        for text, until in zip(texts, stops, strict=True):
            for s in until:
                if s:
                    text = text.split(s, 1)[0]
            results.append(text)
        return results
