"""What a run's records say about where it ran and which code it ran, and what they must not say.

`probe` reads the checkout and the machine (git, /proc, site-packages); `references` names a step's
function and config type so that they can be found again, and fingerprints the code behind them;
`redaction` keeps credentials out of the command line, the logs and the records a run writes. A layer
below the executor: it imports nothing of marin outside it.
"""
