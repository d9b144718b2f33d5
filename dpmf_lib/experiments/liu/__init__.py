"""Liu, Wang & Smola (2015): fast differentially private matrix factorization: one module per notebook."""
