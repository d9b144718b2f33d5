"""Reconstruction attacks on differentially private profile sketches (Balu 2016 thesis, chapter 3).

- ``profiles``   rated-item sets, the 600/343 train/test split, the adversary's item priors
- ``mechanisms`` BLIP (Bloom filter + Bernoulli(p_eps) flips) and JLT (Gaussian codebook + Gaussian noise)
- ``decoders``   popularity, single decoders, c_hat, prefilter, MCMC joint decoder; ``attack`` runs them on one user
- ``gibbs``      numba random-scan Gibbs kernels with incremental likelihoods, and plain references
- ``metrics``    cosine (3.36), mAP@R (3.37), k-NN recall from sanitized sketches
- ``theory``     mutual information (3.16)–(3.26)
"""

from .decoders import (ATTACKS, attack, blip_single_scores, estimate_c_blip, estimate_c_jlt, jlt_single_scores,
                       mcmc_blip, mcmc_jlt)
from .mechanisms import (BLIP, JLT, BloomCodebook, JLTCodebook, blip_flip_probability, bloom_codebook, bloom_filter,
                         jlt_codebook, jlt_sigma)
from .metrics import average_precision_at, cosine_sets, knn_recall, summarize_cosines
from .profiles import Profiles, item_priors, load_dataset, profiles_from_ratings, train_test_split

__all__ = ["ATTACKS", "BLIP", "JLT", "BloomCodebook", "JLTCodebook", "Profiles", "attack", "average_precision_at",
           "blip_flip_probability", "blip_single_scores", "bloom_codebook", "bloom_filter", "cosine_sets",
           "estimate_c_blip", "estimate_c_jlt", "item_priors", "jlt_codebook", "jlt_sigma", "jlt_single_scores",
           "knn_recall", "load_dataset", "mcmc_blip", "mcmc_jlt", "profiles_from_ratings", "summarize_cosines",
           "train_test_split"]
