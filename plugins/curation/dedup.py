"""Exact and near-duplicate removal; the first occurrence is kept.

Exact: equal word sequences (case, punctuation and spacing ignored). Near: MinHash/LSH from
``datasketch`` over word ``shingle``-grams; a row is a near duplicate when an earlier kept row's
estimated Jaccard similarity J(A, B) = |A ∩ B| / |A ∪ B| of their shingle sets is ≥ ``threshold``
(estimated with ``num_perm`` permutations: standard error ≈ sqrt(J(1 − J) / num_perm)).
"""

from __future__ import annotations

import hashlib

from reasonrl.plugins.curation.stage import Drop, Row, Stage
from reasonrl.plugins.curation.text import ngrams, words


class ExactDedup(Stage):
    name = "exact_dedup"

    def __init__(self):
        self._seen: dict[str, str] = {}

    def process(self, row: Row) -> Row | Drop:
        key = hashlib.sha1(" ".join(words(row["question"])).encode()).hexdigest()
        if key in self._seen:
            return Drop("exact_duplicate", f"of row {self._seen[key]}")
        self._seen[key] = str(row["id"])
        return row


class NearDedup(Stage):
    name = "near_dedup"

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, shingle: int = 3, seed: int = 1):
        from datasketch import MinHashLSH

        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"near_dedup.threshold = {threshold}: must be in (0, 1]")
        self.threshold, self.num_perm, self.shingle, self.seed = threshold, num_perm, shingle, seed
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._kept: dict[str, object] = {}

    def settings(self) -> dict:
        return {"threshold": self.threshold, "num_perm": self.num_perm, "shingle": self.shingle, "seed": self.seed}

    def minhash(self, text: str):
        from datasketch import MinHash

        tokens = words(text)
        shingles = ngrams(tokens, self.shingle) if len(tokens) >= self.shingle else {tuple(tokens)}
        signature = MinHash(num_perm=self.num_perm, seed=self.seed)
        for gram in shingles:
            signature.update(" ".join(gram).encode())
        return signature

    def process(self, row: Row) -> Row | Drop:
        signature = self.minhash(row["question"])
        # LSH finds candidates; the estimate decides (LSH alone also returns some pairs below the threshold)
        for key in self._lsh.query(signature):
            similarity = signature.jaccard(self._kept[key])
            if similarity >= self.threshold:
                return Drop("near_duplicate", f"of row {key} (estimated Jaccard {similarity:.2f})")
        key = str(row["id"])
        self._lsh.insert(key, signature)
        self._kept[key] = signature
        return row
