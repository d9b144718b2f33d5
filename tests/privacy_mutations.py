"""Mutation check of the privacy tests (docs/privacy-tests.md): apply one privacy bug at a time to the working tree,
run the named tests, print which fail, restore the file. Every mutation must make at least one test fail.

    python -m tests.privacy_mutations            # all
    python -m tests.privacy_mutations M03 M13    # some

It edits library files in place (restoring them in a ``finally``): run it on a clean tree, with nothing else writing
to it, and never from the pytest suite (its name is not collected).
"""
import os
import subprocess
import sys

WT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
T_LEDGER = "tests/lib/privacy/test_ledger.py"
T_AUDIT = "tests/lib/privacy/test_audit.py"
T_CLIP = "tests/properties/test_clip_bounds.py"
T_NOISE = "tests/properties/test_noise_laws.py"
T_TRUTH = "tests/properties/test_epsilon_truth.py"
T_DP = "tests/properties/test_dp_release.py"
T_CTRL = "tests/properties/test_audit_controls.py"
T_AUDITS = "tests/properties/test_audits.py"
T_ALS = "tests/lib/privacy/test_private_als.py"
ALL = [T_LEDGER, T_AUDIT, T_CLIP, T_NOISE, T_DP, T_AUDITS]
M = [
 ("M01 sensitivity: DPSGD-MF ledger counts φ, not 2φ, per epoch", "dpmf_lib/privacy/ledger.py",
  [('return LedgerEntry("DPSGD-MF", "paper", "rating (change one value)", eps, 0.0, 2.0 * eps, 0.0,', 'return LedgerEntry("DPSGD-MF", "paper", "rating (change one value)", eps, 0.0, 1.0 * eps, 0.0,'),
   ('pld_epsilon=pld_laplace(b, 2 * phi, K), rdp_epsilon=rdp_laplace(b, 2 * phi, K),', 'pld_epsilon=pld_laplace(b, phi, K), rdp_epsilon=rdp_laplace(b, phi, K),')], ALL),
 ("M02 sensitivity: ΔF^(t) off by a factor 2 (nbm/accounting.sensitivity)", "dpmf_lib/nbm/accounting.py",
  [('return 2.0 * error_clamp(t, phi) * phi / validate.positive(C, "C")', 'return error_clamp(t, phi) * phi / validate.positive(C, "C")')], ALL),
 ("M03 coupling ignored: DPSGD-PNBM ledger bound per rating (N_k·ΔF), not L·N_k·ΔF (r̄ spreads a rating)", "dpmf_lib/privacy/ledger.py",
  [('    per_it = L * Nk_eff * eps / (K * gamma)', '    per_it = Nk_eff * eps / (K * gamma)'),
   ('    sens1 = L * Nk_eff * acc.sensitivity(1, phi, C)', '    sens1 = Nk_eff * acc.sensitivity(1, phi, C)')], ALL),
 ("M04 composition not summed: DPSGD-PNBM ledger bound = one iteration's", "dpmf_lib/privacy/ledger.py",
  [('    prov = K * per_it\n', '    prov = per_it\n')], ALL),
 ("M05 composition not summed: Hua S2/S3 as run reported at ε, not T·ε", "dpmf_lib/privacy/ledger.py",
  [('                       T * eps, 0.0,\n', '                       eps, 0.0,\n')], ALL),
 ("M06 composition not summed in the mechanism: DPSGD-PNBM ε^(t) = ε/γ (not divided over K)", "dpmf_lib/nbm/accounting.py",
  [('    return eps / (K * gamma)\n', '    return eps / gamma\n')], ALL),
 ("M07 composition not summed in the mechanism: DPSGD-MF noise Laplace(φ/ε) per epoch, not Kφ/ε", "dpmf_lib/nbm/model.py",
  [('    b = None if epsilon is None else K * (hi - lo) / float(epsilon)', '    b = None if epsilon is None else (hi - lo) / float(epsilon)')], ALL),
 ("M08 composition not summed in the mechanism: clipped DPSGD-PNBM ε_it not divided by K", "dpmf_lib/nbm/model.py",
  [('    eps_iter = (1.0 - mean_share) * eps / K\n', '    eps_iter = (1.0 - mean_share) * eps\n')], ALL),
 ("M09 calibration reused: threshold counts on all runs (calibration included)", "dpmf_lib/privacy/audit.py",
  [('    e0, e1 = sign * s0[c0:], sign * s1[c1:]', '    e0, e1 = sign * s0, sign * s1')], ALL),
 ("M10 calibration reused: black-box projection learned on all runs", "dpmf_lib/privacy/audit.py",
  [('    diff = R1[:c1].mean(axis=0) - R0[:c0].mean(axis=0)', '    diff = R1.mean(axis=0) - R0.mean(axis=0)')], ALL),
 ("M11 confidence correction dropped: each rate's bound at α, not α/2", "dpmf_lib/privacy/audit.py",
  [('    a = (1.0 - confidence) / 2.0\n    fpr, fnr', '    a = (1.0 - confidence)\n    fpr, fnr')], ALL),
 ("M12 confidence correction dropped: point estimates instead of Clopper–Pearson bounds", "dpmf_lib/privacy/audit.py",
  [('    fpr, fnr = cp_upper(int(fp), int(n0), a), cp_upper(int(fn), int(n1), a)', '    fpr, fnr = max(fp / n0, 1e-300), max(fn / n1, 1e-300)')], ALL),
 ("M13 clip bound off: DPSGD-PNBM |c − p sgn s| ≤ φ clip removed", "dpmf_lib/nbm/kernels.py",
  [('                f = ucent[k] - p * sg * dsg\n                f = min(max(f, -f_max), f_max)\n                G[i, j]', '                f = ucent[k] - p * sg * dsg\n                G[i, j]')], ALL),
 ("M14 clip bound off: per-user L1 clip scaled to 2·clip", "dpmf_lib/nbm/kernels.py",
  [('                scale = clip_l1 / tot if tot > clip_l1 else 1.0', '                scale = 2.0 * clip_l1 / tot if tot > clip_l1 else 1.0')], ALL),
 ("M15 data-dependent norm: Liu's B = max_i B_i of the data", "dpmf_lib/privacy/posterior_sampling.py",
  [('    return Preprocessed(trimmed, m, kept, w, B_i, B0, B0, rw,', '    return Preprocessed(trimmed, m, kept, w, B_i, B, B0, rw,')], ALL + [T_TRUTH]),
 ("M16 weight ignored: Liu rating-level ε = ε/τ whatever max_i w_i", "dpmf_lib/privacy/ledger.py",
  [('extra={"epsilon_rating_stated": eps * float(w_max) / tau, "w_max": float(w_max), "B": B})\n\n\ndef liu_clipped_entry', 'extra={"epsilon_rating_stated": eps / tau, "w_max": float(w_max), "B": B})\n\n\ndef liu_clipped_entry')], ALL),
 ("M17 premise ignored: Liu epsilon_effective = ε with Λ fit to the ratings", "dpmf_lib/privacy/posterior_sampling.py",
  [('eps if ((satisfied or clip_loss) and priors_public) else None', 'eps if (satisfied or clip_loss) else None')], ALL + [T_TRUTH, "tests/experiments/liu/test_clipped_loss.py"]),
 ("M18 premise ignored: the ledger prints an idealised bound as provable", "dpmf_lib/privacy/ledger.py",
  [('        if self.premise_broken and not self.no_finite_reason.startswith("premise broken"):', '        if False:')], ALL),
 ("M19 sensitivity: Hua per-coordinate Laplace scale Δ√d/ε, not 2Δ√d/ε", "dpmf_lib/objpert/noise.py",
  [('    return 2.0 * validate.positive(delta, "delta", what=_DELTA) * math.sqrt(validate.integer(d, "d")) / check_eps(eps)', '    return 1.0 * validate.positive(delta, "delta", what=_DELTA) * math.sqrt(validate.integer(d, "d")) / check_eps(eps)')], ALL),
 ("M20 coupling ignored: JLT ledger at L2 sensitivity 1 instead of max_j ‖X_j‖", "dpmf_lib/privacy/ledger.py",
  [('    prov = analytic_gaussian_epsilon(sigma, sensitivity, delta)', '    prov = analytic_gaussian_epsilon(sigma, 1.0, delta)')], ALL),
 ("M21 composition: Hua composed rows at ε per round (not ε/T) while stating ε", "dpmf_lib/privacy/ledger.py",
  [('    er = eps / T\n', '    er = eps\n')], ALL),
 ("M22 drift: DPPS-PNBM clipped error × unclipped derivative (the gradient of no loss)", "dpmf_lib/nbm/kernels.py",
  [('                if rh < rmin or rh > rmax:\n                    continue\n', '                rh = min(max(rh, rmin), rmax)\n')], ALL),
 ("M23 one direction only: ε_lower from one of the two test directions", "dpmf_lib/privacy/audit.py",
  [('    for num_miss, den in ((fnr, fpr), (fpr, fnr)):', '    for num_miss, den in ((fnr, fpr),):')], ALL),
 ("M24 sensitivity: BLIP flip probability at ε instead of ε/K per bit", "dpmf_lib/attacks/mechanisms.py",
  [('return 1.0 / (1.0 + math.exp(e / K))', 'return 1.0 / (1.0 + math.exp(e))')], ALL),
 ("M25 coupling ignored: DPPS-PNBM ledger per user (min(ε,4B)), not n·min(ε,4B)/2", "dpmf_lib/privacy/ledger.py",
  [('    prov = n_users * target / 2.0\n', '    prov = target\n')], ALL),
 ("M26 composition not summed: clipped DPSGD-PNBM ledger ε_it = (1 − share)ε (not /K)", "dpmf_lib/privacy/ledger.py",
  [('    eps_it = (1.0 - mean_share) * eps / K\n', '    eps_it = (1.0 - mean_share) * eps\n')], ALL),
 ("M27 premise ignored: Hua S1 exact epsilon_effective = ε with U fit to the same ratings", "dpmf_lib/objpert/mf.py",
  [('                               "(eps would hold for an idealised release with U independent of the ratings)")', '                               "(eps would hold for an idealised release with U independent of the ratings)")\n                effective = eps')], ALL + [T_TRUTH]),
 ("M28 premise ignored: DPSGD-PNBM's noiseless r̄ in the predictor not marked", "dpmf_lib/privacy/ledger.py",
  [('                       premise_broken="the predictor also releases the item means r̄, computed without noise (the "\n                                      "bound covers S alone)",', '')], ALL + [T_TRUTH]),
 ("M29 composition not summed in the mechanism: private ALS noise in round 1 only", "dpmf_lib/privacy/private_als.py",
  [('        if z is not None:\n            A, b = noisy_item_statistics(', '        if z is not None and _ == 0:\n            A, b = noisy_item_statistics(')], [T_ALS]),
 ("M30 clip bound off: private ALS fit without the ‖u_i‖ ≤ 1 clip", "dpmf_lib/privacy/private_als.py",
  [('        U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord, clip)\n        A, b = statistics(', '        U = user_factors(train.users, train.items, centred, n, V, cfg.lam_u, cfg.bias_coord, False)\n        A, b = statistics(')], [T_ALS]),
 ("M31 clip bound off: private ALS fit without the k-per-user bound", "dpmf_lib/privacy/private_als.py",
  [('    keep = sample_contributions(train.users, n, int(cfg.k), rng)', '    keep = np.arange(len(train.users))')], [T_ALS]),
 ("M32 clip bound off: private ALS fit without the rating clip |r − c| ≤ Γ", "dpmf_lib/privacy/private_als.py",
  [('    centred = np.clip(train.values.astype(np.float64) - c, -gamma, gamma)', '    centred = train.values.astype(np.float64) - c')], [T_ALS]),
 ("M33 sampling: DP-SGD-MF fixed-size batches in poisson_sample", "dpmf_lib/privacy/dpsgd_user.py",
  [('    return np.flatnonzero(rng.random(n) < q).astype(np.int64)', '    return np.sort(rng.choice(n, int(round(q * n)), replace=False)).astype(np.int64)')], [T_ALS]),
 ("M34 sampling: DP-SGD-MF fit with deterministic strided batches", "dpmf_lib/privacy/dpsgd_user.py",
  [('        sampled = poisson_sample(n, cfg.q, rng)', '        sampled = ((np.arange(int(round(cfg.q * n))) + t * int(round(cfg.q * n))) % n).astype(np.int64)')], [T_ALS]),
 ("M35 clip bound off: DP-SGD-MF fit ignores C (clip at 1e9)", "dpmf_lib/privacy/dpsgd_user.py",
  [('noisy_step_gradient(csr, sampled, U, V, cfg.C, sigma, rng)', 'noisy_step_gradient(csr, sampled, U, V, 1e9, sigma, rng)')], [T_ALS]),
 ("M36 relation: DP-SGD-MF replace-one accounted as add/remove-one", "dpmf_lib/privacy/dpsgd_user.py",
  [('rel = {"replace": NR.REPLACE_ONE,', 'rel = {"replace": NR.ADD_OR_REMOVE_ONE,')], [T_ALS]),
 ("M37 sensitivity: DP-SGD-MF replace-one at multiplier σ/2 (contributions 4C apart)", "dpmf_lib/privacy/dpsgd_user.py",
  [('    acc = pa.PLDAccountant(rel, value_discretization_interval=1e-3)\n    acc.compose(_event(q, sigma, steps))', '    acc = pa.PLDAccountant(rel, value_discretization_interval=1e-3)\n    acc.compose(_event(q, sigma / 2.0 if rel == NR.REPLACE_ONE else sigma, steps))')], [T_ALS]),
 ("M38 clip bound off: private ALS runs clip_users=False with noise", "dpmf_lib/privacy/private_als.py",
  [('    if epsilon is not None and not cfg.clip_users:\n', '    if False:\n')], [T_ALS]),
]


def run(which: list[str]) -> list[tuple]:
    """Each selected mutation applied alone, its tests run, the file restored: (name, pytest summary, failed tests)."""
    results = []
    for name, path, reps, tests in M:
        if name.split()[0] not in which:
            continue
        fp = os.path.join(WT, path)
        src = open(fp, encoding="utf-8").read()
        mut = src
        for old, new in reps:
            if old not in mut:
                raise SystemExit(f"{name}: the mutation no longer applies to {path}; update it")
            mut = mut.replace(old, new)
        open(fp, "w", encoding="utf-8").write(mut)
        try:
            p = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests],
                               cwd=WT, env=dict(os.environ, PYTHONPATH=WT), capture_output=True, text=True,
                               timeout=3000)
        finally:
            open(fp, "w", encoding="utf-8").write(src)
        failed = sorted({ln.split(" ")[1] for ln in p.stdout.splitlines() if ln.startswith("FAILED")})
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-300:]
        results.append((name, last, failed))
        print(name, "|", last, "|", failed, flush=True)
    return results


if __name__ == "__main__":
    chosen = sys.argv[1:] or [m[0].split()[0] for m in M]
    survived = [r[0] for r in run(chosen) if not r[2]]
    if survived:
        print("survived (no test failed):", survived)
    sys.exit(1 if survived else 0)
