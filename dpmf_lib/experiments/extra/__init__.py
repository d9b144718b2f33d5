"""Beyond the papers: the privacy ledger and frontier, message sizes, personalized privacy: one module per notebook."""
