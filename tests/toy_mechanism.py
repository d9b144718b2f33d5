"""A user-defined mechanism written against dpmf_lib.privacy.mechanism (the worked example of docs/mechanisms.md):
Gaussian item means with at most k ratings per user, user level (replace one user's ratings)."""

import math

import numpy as np

from dpmf_lib.privacy import ledger as lg
from dpmf_lib.privacy import private_als as pa
from dpmf_lib.privacy.common import seeded
from dpmf_lib.privacy.mechanism import Release, privacy_record


class NoisyItemMeans:
    key = "toy-item-means"
    label = "Toy: Gaussian item means"

    def __init__(self, k: int = 20, prior: float = 5.0):
        self.k, self.prior = int(k), float(prior)

    def fit(self, train, epsilon, delta, seed):
        rng, seed_used, fixed = seeded(seed)
        lo, hi = train.rating_scale
        c, g = 0.5 * (lo + hi), 0.5 * (hi - lo)
        keep = pa.sample_contributions(train.users, train.n_users, self.k, rng)  # ≤ k ratings per user
        M = train.n_items
        sums = np.bincount(train.items[keep], weights=np.clip(train.values[keep] - c, -g, g), minlength=M)
        counts = np.bincount(train.items[keep], minlength=M).astype(float)
        # replacing one user moves the sums by ≤ 2g√k and the counts by ≤ √(2k) in L2: noise multiplier z on both
        # parts is one Gaussian of multiplier z/√2
        z = None if epsilon is None else pa.calibrate(float(epsilon), float(delta), 1) * math.sqrt(2.0)
        if z is not None:
            sums = sums + rng.standard_normal(M) * z * 2 * g * math.sqrt(self.k)
            counts = counts + rng.standard_normal(M) * z * math.sqrt(2 * self.k)
        means = sums / (np.maximum(counts, 0.0) + self.prior)  # shrunk towards the centre c (post-processing)
        eps_rdp = np.nan if z is None else pa._rdp_epsilon(z / math.sqrt(2.0), 1, delta)
        entry = None if epsilon is None else lg.LedgerEntry(self.label, "ours", "user (replace one user's ratings)",
                               float(epsilon), float(delta),
                               float(eps_rdp), float(delta), noise_sampler=lg.FLOAT_GAUSSIAN,
                               rdp_epsilon=float(eps_rdp), accounting_note="RDP of one Gaussian (dp-accounting)",
                               conditions=f"≤ k = {self.k} ratings per user; the number of items public")
        return Release(lambda u, i: c + means[i], entry, privacy_record(entry, seed_used, fixed), published=means)
