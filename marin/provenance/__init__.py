"""What a run's records say about where it ran, probed from the checkout and the machine (`probe`).

A layer below the executor: it reads git, /proc and site-packages, and imports nothing of marin.
"""
