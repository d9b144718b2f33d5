"""Balu (2016 thesis): sketching for private recommender systems (chapters 3, 4 and 5): one module per notebook."""
