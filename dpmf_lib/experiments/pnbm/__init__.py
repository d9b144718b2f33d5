"""Differentially private probabilistic neighbourhood models (DPSGD-PNBM, DPPS-PNBM): one module per notebook."""
