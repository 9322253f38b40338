"""What a run's records say about where it ran, and what they must not say.

`probe` reads the checkout and the machine (git, /proc, site-packages); `redaction` keeps credentials out
of the command line, the logs and the records a run writes. A layer below the executor: it imports
nothing of marin.
"""
