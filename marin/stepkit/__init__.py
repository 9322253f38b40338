"""The step kit: what a step function and its config may use, below the executor.

`config` (StepConfig and its field declarations, the one config walker), `sharding` (run_shards and
ShardResources), `gang` (a step process's place in its gang) and `context` (the running step's
resources). The step library and the executor both import it; it imports only marin.storage.
"""
