"""Data-processing steps (filter, dedup, train a tokenizer, tokenize): plain `fn(config)` functions over paths."""
