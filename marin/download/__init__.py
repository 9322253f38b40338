"""Download steps: copy a dataset from the hub, HTTP, a bucket or disk; write the shipped tutorial corpus."""
