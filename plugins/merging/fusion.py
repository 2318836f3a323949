"""Merge rules on tensors (framework-free: torch only), applied chunk by chunk.

- :class:`Fusion` / :func:`fuse_task_vectors`: LongCat-Flash-Thinking §3.4 model fusion of
  domain experts, task vectors τ_i = θ_i − θ_SFT, in this order:
  1. *normalize* (magnitude normalization across domains): each τ_i rescaled to the mean of the
     experts' L2 norms for that tensor (zero norms included in the mean; a zero τ stays zero);
  2. *drop* (DARE, Yu et al. 2024): keep each entry with probability 1 − p, divide kept entries by
     1 − p (unbiased in expectation);
  3. *erase* (SCE's erasure / TIES' sign election): the majority sign of an entry is the sign of
     Σ_i τ_i; an expert's entry survives if it is non-zero with that sign (erase off: if non-zero);
  4. *merge*: per entry, the mean over the experts whose entry survived (zero where none did),
     times ``scale``, added to the base.
- :class:`Average`: weight averaging (Kimi k1.5 §2.4 long2short "model merging").
- :class:`TaskArithmetic`: θ_base + scale · Σ_i τ_i (Ilharco et al. 2023).

Every rule works on a tensor's flattened entries in chunks of :data:`CHUNK` (steps 2–4 are per
entry; normalization needs each τ_i's norm first: :meth:`Fusion.prepare`), so a checkpoint merge
holds a few chunks per model whatever the tensor's size. The drop masks come from one generator
per (tensor name, expert, chunk), seeded from ``seed``: a streamed merge equals the in-memory one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

#: entries per chunk (fixed: the drop masks depend on it)
CHUNK = 1 << 20

#: read(start, stop) -> the entries [start, stop) of one model's flattened tensor
ChunkRead = Callable[[int, int], torch.Tensor]


def chunk_bounds(numel: int) -> list[tuple[int, int]]:
    return [(start, min(start + CHUNK, numel)) for start in range(0, numel, CHUNK)] or [(0, 0)]


def tensor_seed(seed: int, name: str, expert: int, chunk: int) -> int:
    """The seed of one drop mask: the first 8 bytes of sha256(f"{seed}:{name}:{expert}:{chunk}")."""
    digest = hashlib.sha256(f"{seed}:{name}:{expert}:{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def keep_mask(length: int, drop_rate: float, seed: int, name: str, expert: int, chunk: int) -> torch.Tensor:
    """DARE's keep mask of one chunk of one expert: ``torch.rand(length) >= drop_rate``
    (probability 1 − drop_rate) from its own generator."""
    generator = torch.Generator().manual_seed(tensor_seed(seed, name, expert, chunk))
    return torch.rand(length, generator=generator) >= drop_rate


def drop_masks(shape: torch.Size, experts: int, drop_rate: float, seed: int, name: str) -> list[torch.Tensor]:
    """The whole tensor's keep masks, one per expert (the chunks' masks joined)."""
    numel = int(torch.Size(shape).numel())
    return [
        torch.cat(
            [keep_mask(b - a, drop_rate, seed, name, i, k) for k, (a, b) in enumerate(chunk_bounds(numel))]
        ).reshape(shape)
        for i in range(experts)
    ]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


class Rule:
    """A merge rule: ``prepare`` once per tensor (reads it whole, chunk by chunk, if it must),
    then ``chunk`` for each chunk of the output. ``base`` is the first model's reader (the base,
    or the first model averaged), ``others`` the rest."""

    def prepare(self, name: str, numel: int, dtype: torch.dtype, base: ChunkRead, others: Sequence[ChunkRead]):
        return None

    def chunk(self, name, index, base: torch.Tensor, others: Sequence[torch.Tensor], prepared) -> torch.Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class Fusion(Rule):
    normalize: bool = True
    drop_rate: float = 0.0
    erase: bool = True
    seed: int = 0
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_drop_rate(self.drop_rate)

    def prepare(self, name, numel, dtype, base, others):
        """Step 1's factors: mean norm ÷ each τ_i's norm (0 for a zero τ), from one pass of chunks."""
        if not self.normalize:
            return None
        work = compute_dtype(dtype)
        squares = torch.zeros(len(others), dtype=torch.float64)
        for start, stop in chunk_bounds(numel):
            anchor = base(start, stop).to(work)
            for i, read in enumerate(others):
                squares[i] += (read(start, stop).to(work) - anchor).double().square().sum()
        norms = squares.sqrt()
        return torch.where(norms > 0, norms.mean() / norms, torch.zeros_like(norms))

    def chunk(self, name, index, base, others, prepared):
        anchor = base.to(compute_dtype(base.dtype))
        deltas = torch.empty((len(others), base.numel()), dtype=anchor.dtype)
        for i, (delta, expert) in enumerate(zip(deltas, others)):
            delta.copy_(expert).sub_(anchor)
            if prepared is not None:
                delta.mul_(prepared[i].to(delta.dtype))
            if self.drop_rate > 0.0:
                delta.mul_(keep_mask(delta.numel(), self.drop_rate, self.seed, name, i, index)).div_(
                    1.0 - self.drop_rate
                )
        majority = deltas.sum(dim=0).sign_() if self.erase else None
        count = torch.zeros(base.numel(), dtype=torch.int16)
        for delta in deltas:
            survives = delta != 0
            if majority is not None:
                survives &= delta.sign() == majority
            delta.mul_(survives)
            count += survives
        merged = torch.sum(deltas, dim=0, out=majority) if majority is not None else deltas.sum(dim=0)
        return merged.div_(count.clamp_(min=1)).mul_(self.scale).add_(anchor).to(base.dtype)


@dataclass(frozen=True)
class Average(Rule):
    """Σ_k w_k θ_k / Σ_k w_k over the base-position model and the others (equal weights by default)."""

    weights: tuple[float, ...] | None = None

    def chunk(self, name, index, base, others, prepared):
        weights = self.weights or (1.0,) * (1 + len(others))
        total = base.to(compute_dtype(base.dtype)).mul(weights[0])
        for weight, tensor in zip(weights[1:], others):
            total.add_(tensor.to(total.dtype), alpha=weight)
        return total.div_(sum(weights)).to(base.dtype)


@dataclass(frozen=True)
class TaskArithmetic(Rule):
    """θ_base + scale · Σ_i (θ_i − θ_base)."""

    scale: float = 1.0

    def chunk(self, name, index, base, others, prepared):
        anchor = base.to(compute_dtype(base.dtype))
        total = torch.zeros_like(anchor)
        for expert in others:
            total.add_(expert.to(anchor.dtype)).sub_(anchor)
        return total.mul_(self.scale).add_(anchor).to(base.dtype)


def apply_rule(rule: Rule, name: str, base: torch.Tensor, others: Sequence[torch.Tensor]) -> torch.Tensor:
    """``rule`` on in-memory tensors, through the same chunks as a checkpoint merge. Non-floating
    tensors (integer buffers) are the base's."""
    if not base.is_floating_point():
        return base.clone()
    flat = [t.reshape(-1) for t in (base, *others)]

    def reader(tensor):
        return lambda start, stop: tensor[start:stop]

    prepared = rule.prepare(name, base.numel(), base.dtype, reader(flat[0]), [reader(t) for t in flat[1:]])
    chunks = [
        rule.chunk(name, k, flat[0][a:b], [t[a:b] for t in flat[1:]], prepared)
        for k, (a, b) in enumerate(chunk_bounds(base.numel()))
    ]
    return torch.cat(chunks).reshape(base.shape)


def check_same_layout(base: Mapping[str, torch.Tensor], experts: Sequence[Mapping[str, torch.Tensor]]) -> None:
    """Tensors are merged by name: every expert must have the base's names and shapes."""
    if not experts:
        raise ValueError("experts: at least one expert state dict is needed")
    for index, expert in enumerate(experts):
        missing, extra = sorted(set(base) - set(expert)), sorted(set(expert) - set(base))
        if missing or extra:
            raise ValueError(
                f"experts[{index}]: tensor names differ from the base (missing {missing[:5]}, extra {extra[:5]})"
            )
        for name, tensor in base.items():
            if expert[name].shape != tensor.shape:
                raise ValueError(
                    f"experts[{index}]: tensor {name!r} has shape {tuple(expert[name].shape)}, the base {tuple(tensor.shape)}"
                )


def check_drop_rate(drop_rate: float) -> None:
    if not 0.0 <= drop_rate < 1.0:
        raise ValueError(f"drop_rate: {drop_rate} is outside [0, 1)")


def fuse_task_vectors(
    base: Mapping[str, torch.Tensor],
    experts: Sequence[Mapping[str, torch.Tensor]],
    normalize: bool = True,
    drop_rate: float = 0.0,
    erase: bool = True,
    seed: int = 0,
    scale: float = 1.0,
) -> dict[str, torch.Tensor]:
    """LongCat §3.4's fusion of in-memory state dicts (public facade ``reasonrl.api.fuse_task_vectors``;
    ``reasonrl merge`` applies the same :class:`Fusion` rule to checkpoints, chunk by chunk)."""
    rule = Fusion(normalize, drop_rate, erase, seed, scale)
    check_same_layout(base, experts)
    return {name: apply_rule(rule, name, tensor, [e[name] for e in experts]) for name, tensor in base.items()}


def average_tensors(tensors: Sequence[torch.Tensor], weights: Sequence[float] | None = None) -> torch.Tensor:
    """Weight averaging of in-memory tensors (:class:`Average`)."""
    return apply_rule(Average(tuple(weights) if weights else None), "", tensors[0], list(tensors[1:]))


def task_arithmetic_tensor(base: torch.Tensor, experts: Sequence[torch.Tensor], scale: float = 1.0) -> torch.Tensor:
    """Task arithmetic of in-memory tensors (:class:`TaskArithmetic`)."""
    return apply_rule(TaskArithmetic(scale), "", base, list(experts))
