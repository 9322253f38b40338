"""The tools over records: what the CLI runs on a prefix's records, beside the executor rather than in it.

`marin verify` (verify, verify_values), `marin rerun` (rerun, rebuild), `marin explain`, `marin status`
(inspect_prefix), `marin submit` and `marin plan --cost` (plan_cost). They read and replay what the
executor wrote; the executor never imports them.
"""
