"""The runner's parts: :mod:`.rehash` (moving run records to the current hash scheme) and :mod:`.canary` (canary
revalidation of snapshot rows). The command line and execution live in :mod:`dpmf_lib.reproduce`."""
