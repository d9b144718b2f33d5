"""Hua, Xia & Zhong (2015): objective-perturbation DP matrix factorization: one module per notebook."""
